// KV events for routers against the real daemon (issue 10): `kvtrie serve --kv-events` on lavapipe with 1 MiB
// KV tiers, and tests/server/kv_events_router.py as the router: random multi-conversation traffic with
// branches, two namespaces, demotions, evictions and a flush; the index it rebuilds from the events alone
// equals GET /cache/pages per tier, its longest prefix equals cached_tokens, namespaces get disjoint hashes,
// a late subscriber catches up through the replay socket, and every batch decodes against vLLM's schema.
// Skips when Debian's python3 lacks python3-zmq, python3-msgpack or python3-xxhash.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/bench/run_command.h"
#include "tests/server/daemon_process.h"
#include "tests/support/paths.h"

namespace kvtrie::test {
namespace {

// Debian's interpreter, which sees the python3-* packages (a python3 earlier on PATH may not).
std::string debian_python() {
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

TEST(KvEventsDaemon, RouterIndexFromEventsMatchesTheCacheAndItsHits) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed";
  // 32 KiB pages: 1 MiB holds 32 pages per tier, so a few conversations demote and evict.
  const auto model = slow_model(scratch_dir()).string();
  const int port = free_port(), events = free_port(), replay = free_port();
  const std::string events_endpoint = "tcp://127.0.0.1:" + std::to_string(events);
  const std::string replay_endpoint = "tcp://127.0.0.1:" + std::to_string(replay);
  DaemonProcess d({"serve", "--model", model, "--port", std::to_string(port), "--ctx-size", "1024",
                   "--parallel", "3", "--kv-device-mb", "1", "--kv-host-mb", "1", "--kv-events",
                   events_endpoint, "--kv-events-replay", replay_endpoint, "--kv-events-topic",
                   "kv@test@slow"});
  ASSERT_TRUE(d.wait_ready(port, std::chrono::seconds(60))) << d.log();

  const std::string cmd = debian_python() +
                          " " KVTRIE_SOURCE_DIR "/tests/server/kv_events_router.py --port " +
                          std::to_string(port) + " --events " + events_endpoint + " --replay " +
                          replay_endpoint + " --topic kv@test@slow";
  auto [status, out] = run_command(cmd);
  if (status == 77) GTEST_SKIP() << out;
  EXPECT_EQ(status, 0) << out << d.log();
  std::cout << out;

  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(20)), 0) << d.log();
  EXPECT_EQ(d.log().find("vulkan validation"), std::string::npos) << d.log();
}

TEST(KvEventsDaemon, AnEndpointThatCannotBeBoundFailsTheLoadNamingIt) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d({"serve", "--model", model, "--port", std::to_string(port), "--ctx-size", "256",
                   "--kv-events", "tcp://*:" + std::to_string(free_port()), "--kv-events-replay",
                   "nonsense"});
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(60)), 1) << d.log();
  EXPECT_NE(d.log().find("--kv-events-replay nonsense"), std::string::npos) << d.log();
}

}  // namespace
}  // namespace kvtrie::test
