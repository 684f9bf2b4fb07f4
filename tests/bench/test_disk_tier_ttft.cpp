// bench/disk_tier_ttft.py, issue 11's TTFT table, against the real daemon on lavapipe with a tiny model: the
// script runs every step (cold, device hit, another prompt, host-tier step, SIGTERM, restart, disk hit, a
// second restart and disk hit with the files in the page cache, the same two reading the whole run, plain
// read) and the requests after the restarts find the prompt's full pages on disk (all of them when they read
// the whole run). The GPU machine runs it on
// llama3-8b; this catches a broken script before it costs GPU time. Skips when python3 is absent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/bench/run_command.h"
#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

TEST(DiskTierTtft, EveryStepRunsAndTheRestartHitsTheDiskTier) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed: bench/disk_tier_ttft.py cannot run";
  const auto model = tiny_model(scratch_dir()).string();
  const std::string cmd =
      "python3 " KVTRIE_SOURCE_DIR "/bench/disk_tier_ttft.py " KVTRIE_BINARY_DIR " " + model + " " +
      (scratch_dir() / "disk").string() +
      " --tokens 200 --vocab 320 --kv-device-mb 1 --kv-host-mb 2 --kv-disk-mb 64 --port " +
      std::to_string(free_port());
  auto [status, out] = run_command(cmd);
  ASSERT_EQ(status, 0) << out;
  std::vector<json> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 9u) << out;
  const char* steps[] = {"cold",
                         "device_hit",
                         "other_prompt",
                         "host_hit",
                         "disk_hit_after_restart",
                         "disk_hit_after_restart_page_cache_warm",
                         "disk_hit_after_restart_whole_read",
                         "disk_hit_after_restart_whole_read_page_cache_warm",
                         "plain_sequential_read"};
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i]["step"], steps[i]) << out;
  EXPECT_EQ(rows[0]["cached_tokens"], 0);
  EXPECT_EQ(rows[1]["cached_tokens"], 199);
  // 199 usable tokens: 12 full pages of 16, those the read got to from disk with the overlap, all of them
  // without.
  for (size_t i : {4, 5}) {
    EXPECT_LE(rows[i]["cached_tokens_disk"].get<int>(), 192) << out;
    EXPECT_EQ(rows[i]["cached_tokens_disk"].get<int>() % 16, 0) << out;
  }
  EXPECT_EQ(rows[6]["cached_tokens_disk"], 192) << out;
  EXPECT_EQ(rows[7]["cached_tokens_disk"], 192) << out;
  EXPECT_GT(rows[8]["files"].get<int>(), 0);
  EXPECT_GT(rows[8]["bytes"].get<double>(), 0);
}

}  // namespace
}  // namespace kvtrie::test
