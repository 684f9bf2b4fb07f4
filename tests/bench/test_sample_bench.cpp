// kvtrie-bench sample: one row per sampling setting, each with a positive time a draw (the command line as
// the GPU machine's calls run it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "tests/bench/run_command.h"

namespace kvtrie::test {
namespace {

TEST(SampleBench, EverySettingGetsARowWithItsTimeADraw) {
  auto [status, out] = run_command(KVTRIE_BINARY_DIR
                                   "/bench/kvtrie-bench sample --vocab 3000 --draws 20 "
                                   "--repeats 1 --warmup 0 2>/dev/null");
  ASSERT_EQ(status, 0) << out;
  std::set<std::string> settings;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    EXPECT_EQ(row["bench"], "sample");
    EXPECT_EQ(row["vocab"], 3000);
    EXPECT_GT(row["us"].get<double>(), 0.0) << line;
    settings.insert(row["params"].get<std::string>());
  }
  EXPECT_EQ(settings,
            (std::set<std::string>{"greedy", "defaults", "defaults_repeat_penalty", "top_p_without_top_k"}));
}

}  // namespace
}  // namespace kvtrie::test
