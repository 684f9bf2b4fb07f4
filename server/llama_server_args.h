// Contract: the command line of llama.cpp's llama-server as Ollama uses it (SPEC 5), for when kvtrie runs
// under that name. Every flag Ollama passes is accepted; those that do not apply to kvtrie are logged and
// ignored; an unknown flag is refused with a message naming it (exit code 2). Called once, from run_cli().
#pragma once
#include <string>
#include <variant>
#include <vector>

#include "server/options.h"

namespace kvtrie::server {

struct LlamaServerArgs {
  ServeOptions options;
  bool list_devices = false;
  bool help = false;
  bool version = false;
  bool log_prefix = true;
  std::vector<std::string> ignored;  // "flag value" notes for the log
};

// The parsed arguments, or an error message.
std::variant<LlamaServerArgs, std::string> parse_llama_server_args(const std::vector<std::string>& args);

int run_llama_server(int argc, char** argv);

}  // namespace kvtrie::server
