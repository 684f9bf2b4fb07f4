#include "server/cli.h"

int main(int argc, char** argv) {
  return kvtrie::server::run_cli(argc, argv);
}
