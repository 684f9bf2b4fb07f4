// bench/http_multiturn.py, the HTTP multi-turn benchmark client, against the real daemon started as
// `llama-server` on a tiny model (lavapipe): a tiny workload completes with every request answered, the
// later turns find their history cached, and the JSON summary counts what it ran. Skips when python3 is
// absent.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "tests/bench/run_command.h"
#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

TEST(HttpMultiturn, TinyWorkloadAgainstDaemonSucceedsWithLaterTurnsCached) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed: bench/http_multiturn.py cannot run";
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d(
      {"--model", model, "--port", std::to_string(port), "--host", "127.0.0.1", "-c", "256", "-np", "2"},
      llama_server_link());
  ASSERT_TRUE(d.wait_ready(port, std::chrono::seconds(60))) << d.log();

  const auto requests = scratch_dir() / "requests.jsonl";
  const std::string cmd =
      "python3 " KVTRIE_SOURCE_DIR "/bench/http_multiturn.py --url http://127.0.0.1:" + std::to_string(port) +
      " --label kvtrie --model tiny --conversations 2 --turns 2" +
      " --system 32 --user 16 --answer 8 --clients 2 --timeout 60 --deadline 120" + " --requests-out " +
      requests.string();
  auto [status, out] = run_command(cmd);
  ASSERT_EQ(status, 0) << out << d.log();
  ASSERT_FALSE(out.empty());
  const json s = json::parse(out);  // exactly one JSON object on stdout

  EXPECT_EQ(s["bench"], "multiturn_http");
  EXPECT_EQ(s["server"], "kvtrie");
  EXPECT_EQ(s["requests"], 4);
  EXPECT_EQ(s["ok"], 4);
  EXPECT_EQ(s["failed"], 0);
  EXPECT_EQ(s["skipped"], 0);
  EXPECT_EQ(s["errors"].size(), 0u);
  EXPECT_TRUE(s["warmup_error"].is_null()) << s["warmup_error"];
  // Every answer has exactly its 8 forced tokens, returned as ids, so the next turn's history is exact.
  EXPECT_EQ(s["completion_tokens"], 2 * 2 * 8);
  EXPECT_EQ(s["short_answers"], 0);
  EXPECT_EQ(s["answer_tokens_returned"], 4);
  // Turn 2 resends system + user 1 + answer 1 (56 tokens); the server reports them (or most) cached.
  ASSERT_TRUE(s["cached_later_min"].is_number()) << out;
  EXPECT_GT(s["cached_later_min"].get<int>(), 0) << out;
  EXPECT_GT(s["hit_rate"].get<double>(), 0.0);
  EXPECT_GT(s["completion_tok_s"].get<double>(), 0.0);
  EXPECT_TRUE(s["ttft_later_p50_ms"].is_number()) << out;
  EXPECT_TRUE(s["ttft_first_turn_p50_ms"].is_number()) << out;

  // The per-request file has one line per request, each turn's prompt the previous one's plus 8 + 16 tokens.
  std::ifstream in(requests);
  std::map<std::pair<int, int>, int> prompt_tokens;
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line);
    EXPECT_TRUE(r["ok"].get<bool>()) << line;
    prompt_tokens[{r["conversation"].get<int>(), r["turn"].get<int>()}] = r["prompt_tokens"].get<int>();
  }
  ASSERT_EQ(prompt_tokens.size(), 4u);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(prompt_tokens[std::make_pair(c, 1)], 32 + 16);
    EXPECT_EQ(prompt_tokens[std::make_pair(c, 2)], 32 + 16 + 8 + 16);
  }

  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(10)), 0) << d.log();
}

TEST(HttpMultiturn, UnreachableServerCountsFailuresAndExitsNonZero) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed: bench/http_multiturn.py cannot run";
  const int port = free_port();  // nothing listens there
  const std::string cmd =
      "python3 " KVTRIE_SOURCE_DIR "/bench/http_multiturn.py --url http://127.0.0.1:" + std::to_string(port) +
      " --conversations 3 --turns 2 --system 8 --user 4 --answer 2" + " --clients 2 --timeout 5";
  auto [status, out] = run_command(cmd);
  EXPECT_EQ(status, 1) << out;
  const json s = json::parse(out);
  // Each conversation's first turn fails; its second is never sent.
  EXPECT_EQ(s["ok"], 0);
  EXPECT_EQ(s["failed"], 3);
  EXPECT_EQ(s["skipped"], 3);
  EXPECT_FALSE(s["warmup_error"].is_null());
  EXPECT_GE(s["errors"].size(), 1u);
}

}  // namespace
}  // namespace kvtrie::test
