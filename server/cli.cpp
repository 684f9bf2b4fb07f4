#include "server/cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

namespace kvtrie::server {

int run_cli(int argc, char** argv) {
  CLI::App app{"kvtrie: an LLM inference daemon with a prefix-trie KV cache shared by all conversations"};
  app.set_version_flag("--version", std::string("kvtrie ") + KVTRIE_VERSION);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {
    std::cout << app.help();
  }
  return 0;
}

}  // namespace kvtrie::server
