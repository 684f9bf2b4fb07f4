// Process lifecycle of the real daemon: SIGTERM during a generation, configuration from the config file
// and KVTRIE_* environment variables with the documented precedence, bad command lines.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

TEST(Lifecycle, SigtermDuringGenerationExitsZeroWithinTheGracePeriod) {
  const auto model = slow_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d({"serve", "--model", model, "--port", std::to_string(port), "--cpu-reference",
                   "--shutdown-grace-ms", "500"});
  ASSERT_TRUE(d.wait_ready(port)) << d.log();
  std::string body;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    auto r = c.Post("/generate", json({{"prompt", "go"}, {"max_tokens", 4000}, {"ignore_eos", true}}).dump(),
                    "application/json");
    if (r) body = r->body;
  });
  // Wait until the generation holds a slot (a fixed sleep raced a loaded CI machine), then ask the daemon to
  // stop.
  httplib::Client probe("127.0.0.1", port);
  bool running = false;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       !running && std::chrono::steady_clock::now() < until;) {
    auto m = probe.Get("/metrics");
    running = m && m->body.find("kvtrie_requests_active 1") != std::string::npos;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(running) << "the generation never started\n"
                       << d.log();  // not ASSERT: the client must be joined
  const auto t0 = std::chrono::steady_clock::now();
  d.signal(SIGTERM);
  auto code = d.wait_exit(std::chrono::seconds(5));
  const auto took = std::chrono::steady_clock::now() - t0;
  client.join();
  ASSERT_TRUE(code.has_value()) << d.log();
  EXPECT_EQ(*code, 0);
  EXPECT_LT(took, std::chrono::milliseconds(3000)) << "grace period 500 ms";
  // The in-flight request was cancelled cleanly: its stream ended with the final line.
  auto lines = lines_of(body);
  ASSERT_FALSE(lines.empty());
  json last = json::parse(lines.back());
  EXPECT_EQ(last["done_reason"], "cancelled");
  EXPECT_NE(d.log().find("received SIGTERM"), std::string::npos);
}

TEST(Lifecycle, ConfigFileSetsOptionsAndEnvironmentOverridesIt) {
  const auto model = tiny_model(scratch_dir()).string();
  const int file_port = free_port();
  const auto conf = scratch_dir() / "kvtrie.conf";
  {
    std::ofstream out(conf);
    out << "# test config\nmodel = " << model << "\nport = " << file_port
        << "\ncpu-reference = true\nparallel = 2\n";
  }
  {
    DaemonProcess d({"serve", "--config", conf.string()});
    EXPECT_TRUE(d.wait_ready(file_port)) << d.log();
    EXPECT_NE(d.log().find("parallel=2"), std::string::npos) << d.log();
  }
  const int env_port = free_port();
  {
    DaemonProcess d({"serve", "--config", conf.string()}, kvtrie_binary(),
                    {"KVTRIE_PORT=" + std::to_string(env_port)});
    EXPECT_TRUE(d.wait_ready(env_port)) << d.log();
  }
  const int flag_port = free_port();
  {
    DaemonProcess d({"serve", "--config", conf.string(), "--port", std::to_string(flag_port)},
                    kvtrie_binary(), {"KVTRIE_PORT=" + std::to_string(env_port)});
    EXPECT_TRUE(d.wait_ready(flag_port)) << d.log();
  }
}

TEST(Lifecycle, UnknownConfigKeyIsRefusedNamingTheFile) {
  const auto conf = scratch_dir() / "bad.conf";
  {
    std::ofstream out(conf);
    out << "prot = 1234\n";
  }
  DaemonProcess d({"serve", "--config", conf.string()});
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 2);
  EXPECT_NE(d.log().find("unknown key \"prot\""), std::string::npos) << d.log();
}

TEST(Lifecycle, MissingOrBrokenModelExitsNonZeroWithAClearMessage) {
  DaemonProcess missing({"serve", "--model", (scratch_dir() / "absent.gguf").string(), "--port", "0"});
  auto code = missing.wait_exit(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);

  const auto broken = scratch_dir() / "broken.gguf";
  {
    std::ofstream out(broken);
    out << "GGUF but not really";
  }
  const int port = free_port();
  DaemonProcess d({"serve", "--model", broken.string(), "--port", std::to_string(port), "--cpu-reference"});
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_NE(d.log().find("broken.gguf"), std::string::npos) << d.log();
}

}  // namespace
}  // namespace kvtrie::test
