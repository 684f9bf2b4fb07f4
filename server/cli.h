// Contract: the kvtrie command line. run_cli() parses argv (and KVTRIE_* environment variables and the
// config file), runs the chosen subcommand and returns the process exit code. Called once, from main().
#pragma once

namespace kvtrie::server {

int run_cli(int argc, char** argv);

}  // namespace kvtrie::server
