// Contract: the kvtrie command line. run_cli() parses argv (and KVTRIE_* environment variables and the
// config file), runs the chosen subcommand and returns the process exit code. Started under the name
// "llama-server" it parses llama-server's flags instead (llama_server_args.h). Called once, from main().
#pragma once
#include <string>

namespace kvtrie::server {

int run_cli(int argc, char** argv);

// spdlog to stderr (the journal under systemd) at the given level; without prefix, bare messages.
void setup_logging(const std::string& level, bool with_prefix);

}  // namespace kvtrie::server
