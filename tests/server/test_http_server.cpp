// HttpServer on its own (no model, no engine): the listener's start/stop life cycle.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "server/http_server.h"

namespace kvtrie::server {
namespace {

// Regression: a stop() right after start() (a SIGTERM just after start-up) came before the listener thread
// had marked the server running, did nothing, and stop() then waited for that thread forever. A watchdog
// turns a hang into a prompt failure.
TEST(HttpServer, StopRightAfterStartAlwaysReturns) {
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !finished; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!finished) {
      std::fprintf(stderr, "HttpServer::stop() right after start() hung\n");
      std::_Exit(1);
    }
  });
  for (int i = 0; i < 300; ++i) {
    HttpServerOptions options;
    options.port = 0;  // any free port
    options.threads = 2;
    HttpServer server(options);
    std::string error;
    if (!server.start(error)) {
      ADD_FAILURE() << error;
      break;
    }
    server.stop();
  }
  finished = true;
  watchdog.join();
}

}  // namespace
}  // namespace kvtrie::server
