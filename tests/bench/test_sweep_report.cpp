// The sweep's scripts on canned input: bench/peer_rows.py turns peerbench's output (the lines of
// ../shared/peer/peerbench.cpp, as printed on an H200) into rows, and bench/sweep_report.py pairs kvtrie's
// rows with llama.cpp's into side_by_side.jsonl and the summary's tables. Skips when python3 is absent.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/bench/run_command.h"
#include "tests/support/paths.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

const std::string kScripts = KVTRIE_SOURCE_DIR "/bench/";

// peerbench MODEL LIB 99 512 128 3, stdout and stderr together (the loader's lines shortened).
const char* kPeerSingle =
    "ggml_vulkan: Found 1 Vulkan devices:\n"
    "ggml_vulkan: 0 = NVIDIA H200 (NVIDIA) | uma: 0 | fp16: 1 | bf16: 1 | warp size: 32 | shared memory: "
    "49152 | "
    "int dot: 1 | matrix cores: NV_coopmat2\n"
    "llama_model_loader: - kv   0:                       general.architecture str              = llama\n"
    "peer load+context 1.33 s\n"
    "peer llama.cpp /tmp/kvtrie-models/llama3-8b-Q4_0.gguf ngl=99: pp512 9921.0 tok/s  tg128 253.1 tok/s "
    "(best of 3)\n";

// peerbench MODEL LIB 99 512 16 1 32: its pp/tg line is a one-repeat warm-up.
const char* kPeerParallel =
    "peer load+context 1.40 s\n"
    "peer llama.cpp /tmp/kvtrie-models/llama3-8b-Q4_0.gguf ngl=99: pp512 9000.0 tok/s  tg16 240.0 tok/s "
    "(best of 1)\n"
    "peer llama.cpp par=32 ctx=512: decode 1592.0 tok/s aggregate\n";

std::filesystem::path write(const std::string& name, const std::string& text) {
  const auto path = scratch_dir() / name;
  std::ofstream(path) << text;
  return path;
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(json::parse(line));
  return rows;
}

std::vector<json> peer_rows(const std::string& output, const std::string& flags, int* status = nullptr) {
  const auto in = write("peer.txt", output);
  auto [rc, out] =
      run_command("python3 " + kScripts + "peer_rows.py --model /tmp/kvtrie-models/llama3-8b-Q4_0.gguf " +
                  flags + " < " + in.string());
  if (status) *status = rc;
  return json_lines(out);
}

TEST(PeerRows, SingleRunGivesLoadPrefillAndDecodeAtThePromptsContext) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed";
  int status = -1;
  const auto rows = peer_rows(kPeerSingle, "", &status);
  EXPECT_EQ(status, 0);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) {
    EXPECT_EQ(r["engine"], "llama.cpp");
    EXPECT_EQ(r["model"], "llama3-8b-Q4_0");  // the file stem, as kvtrie-bench names it
    EXPECT_EQ(r["peer_device"], "NVIDIA H200");
    EXPECT_NE(r["peer_features"].get<std::string>().find("matrix cores: NV_coopmat2"), std::string::npos);
    EXPECT_EQ(r["ngl"], 99);
  }
  EXPECT_EQ(rows[0]["bench"], "load");
  EXPECT_DOUBLE_EQ(rows[0]["load_s"].get<double>(), 1.33);
  EXPECT_EQ(rows[1]["bench"], "prefill");
  EXPECT_EQ(rows[1]["prompt"], 512);
  EXPECT_DOUBLE_EQ(rows[1]["tok_s"].get<double>(), 9921.0);
  EXPECT_EQ(rows[1]["repeats"], 3);
  EXPECT_EQ(rows[2]["bench"], "decode");
  EXPECT_EQ(rows[2]["context"], 512);  // peerbench decodes right after its 512-token prompt
  EXPECT_EQ(rows[2]["sequences"], 1);
  EXPECT_EQ(rows[2]["tokens"], 128);
  EXPECT_DOUBLE_EQ(rows[2]["tok_s"].get<double>(), 253.1);
}

TEST(PeerRows, OnlyParallelKeepsTheAggregateDecodeRowAlone) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed";
  const auto rows = peer_rows(kPeerParallel, "--only-parallel");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["bench"], "decode");
  EXPECT_EQ(rows[0]["sequences"], 32);
  EXPECT_EQ(rows[0]["context"], 512);
  EXPECT_DOUBLE_EQ(rows[0]["tok_s"].get<double>(), 1592.0);
}

TEST(PeerRows, OutputWithoutMeasurementExitsNonZero) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed";
  int status = -1;
  const auto rows =
      peer_rows("peer load+context 1.00 s\nllama_model_load: error loading model\n", "", &status);
  EXPECT_EQ(status, 1);
  for (const auto& r : rows) EXPECT_EQ(r["bench"], "load");
}

// kvtrie-bench rows (trimmed to the keys the report reads), peer rows, and both HTTP multi-turn rows.
std::string canned_results() {
  std::string s;
  auto add = [&s](const json& j) { s += j.dump() + "\n"; };
  const std::string m = "llama3-8b-Q4_0";
  add({{"bench", "load"}, {"model", m}, {"device", "NVIDIA H200"}, {"load_s", 0.52}});
  add({{"bench", "prefill"}, {"model", m}, {"device", "NVIDIA H200"}, {"prompt", 512}, {"tok_s", 1837.0}});
  add({{"bench", "decode"},
       {"model", m},
       {"device", "NVIDIA H200"},
       {"context", 512},
       {"sequences", 1},
       {"tok_s", 210.0},
       {"step_ms", 4.76},
       {"bound_tok_s", 983.0},
       {"bound_ratio", 0.21}});
  add({{"bench", "decode"},
       {"model", m},
       {"device", "NVIDIA H200"},
       {"context", 4096},
       {"sequences", 1},
       {"tok_s", 190.0},
       {"step_ms", 5.26}});
  add({{"bench", "decode"},
       {"model", m},
       {"device", "NVIDIA H200"},
       {"context", 512},
       {"sequences", 32},
       {"tok_s", 547.0},
       {"step_ms", 58.5}});
  for (const auto& r : peer_rows(kPeerSingle, "")) add(r);
  for (const auto& r : peer_rows(kPeerParallel, "--only-parallel")) add(r);
  const json workload = {{"model", m},  {"conversations", 32}, {"turns", 5},  {"system", 2048},
                         {"user", 256}, {"answer", 128},       {"clients", 8}};
  json k = workload, p = workload;
  k.update({{"bench", "multiturn_http"},
            {"server", "kvtrie"},
            {"completion_tok_s", 221.0},
            {"ttft_later_p50_ms", 863.0},
            {"hit_rate", 0.91},
            {"failed", 0},
            {"skipped", 0},
            {"answer_tokens_missing", 0}});
  p.update({{"bench", "multiturn_http"},
            {"server", "llama.cpp"},
            {"completion_tok_s", 246.0},
            {"ttft_later_p50_ms", 611.0},
            {"hit_rate", 0.63},
            {"failed", 0},
            {"skipped", 2},
            {"answer_tokens_missing", 3}});
  add(k);
  add(p);
  return s;
}

// sweep_report.py on `results` (written as `name`.jsonl) with commit abc1234: its exit status, its summary
// and its side-by-side rows.
struct Report {
  int status = 0;
  std::string summary;
  std::vector<json> rows;
};
Report report(const std::string& name, const std::string& results) {
  const auto results_path = write(name + ".jsonl", results);
  const auto sbs_path = scratch_dir() / (name + "_side_by_side.jsonl");
  auto [status, summary] = run_command("python3 " + kScripts + "sweep_report.py " + results_path.string() +
                                       " --side-by-side " + sbs_path.string() + " --commit abc1234");
  std::ifstream in(sbs_path);
  return {status, summary, json_lines(std::string(std::istreambuf_iterator<char>(in), {}))};
}

TEST(SweepReport, SideBySideRowsPairKvtrieWithLlamaCppAndComputeRatios) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed";
  const auto [status, summary, rows] = report("results", canned_results());
  ASSERT_EQ(status, 0) << summary;
  ASSERT_EQ(rows.size(), 5u);  // prefill 512; decode 1x512, 1x4096, 32x512; multiturn
  for (const auto& r : rows) {
    EXPECT_EQ(r["model"], "llama3-8b-Q4_0");
    EXPECT_EQ(r["device"], "NVIDIA H200");
    EXPECT_EQ(r["commit"], "abc1234");
  }
  EXPECT_EQ(rows[0]["bench"], "prefill");
  EXPECT_EQ(rows[0]["prompt"], 512);
  EXPECT_DOUBLE_EQ(rows[0]["kvtrie_tok_s"].get<double>(), 1837.0);
  EXPECT_DOUBLE_EQ(rows[0]["llamacpp_tok_s"].get<double>(), 9921.0);
  EXPECT_NEAR(rows[0]["ratio"].get<double>(), 1837.0 / 9921.0, 1e-3);

  EXPECT_EQ(rows[1]["bench"], "decode");
  EXPECT_EQ(rows[1]["context"], 512);
  EXPECT_EQ(rows[1]["sequences"], 1);
  EXPECT_NEAR(rows[1]["ratio"].get<double>(), 210.0 / 253.1, 1e-3);
  // llama.cpp did not run at context 4096 here: its side is null, and so is the ratio.
  EXPECT_EQ(rows[2]["context"], 4096);
  EXPECT_TRUE(rows[2]["llamacpp_tok_s"].is_null());
  EXPECT_TRUE(rows[2]["ratio"].is_null());
  EXPECT_EQ(rows[3]["sequences"], 32);
  EXPECT_NEAR(rows[3]["ratio"].get<double>(), 547.0 / 1592.0, 1e-3);

  const json& mt = rows[4];
  EXPECT_EQ(mt["bench"], "multiturn");
  EXPECT_EQ(mt["conversations"], 32);
  EXPECT_EQ(mt["sequences"], 8);
  EXPECT_NEAR(mt["ratio"].get<double>(), 221.0 / 246.0, 1e-3);
  EXPECT_DOUBLE_EQ(mt["kvtrie_ttft_p50_ms"].get<double>(), 863.0);
  EXPECT_DOUBLE_EQ(mt["llamacpp_ttft_p50_ms"].get<double>(), 611.0);
  EXPECT_EQ(mt["llamacpp_answer_tokens_missing"], 3);
  EXPECT_EQ(mt["llamacpp_skipped"], 2);

  // The summary carries the side-by-side table row and the multi-turn table.
  EXPECT_NE(summary.find("| llama3-8b-Q4_0 | prefill 512 | 1,837.0 | 9,921.0 | 0.19 |"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("| llama.cpp | 246.0 | 611 | 0.63 | 0 / 2 | 3 |"), std::string::npos) << summary;
  EXPECT_NE(summary.find("NV_coopmat2"), std::string::npos) << summary;
  // The read-bound share in percent to a tenth (0.21 of the bound).
  EXPECT_NE(summary.find("| 983 | 21.0% |"), std::string::npos) << summary;
}

// An http-only run (run_device.sh STEPS=http) has no kvtrie-bench row naming the card: its side-by-side row
// and summary take the device from run_device.sh's machine row.
TEST(SweepReport, AnHttpOnlyRunNamesItsCardFromTheMachineRow) {
  if (!have_python3()) GTEST_SKIP() << "python3 is not installed";
  std::string http_only = json({{"bench", "machine"}, {"device", "NVIDIA H200"}}).dump() + "\n";
  std::istringstream canned(canned_results());
  for (std::string line; std::getline(canned, line);)
    if (line.find("multiturn_http") != std::string::npos) http_only += line + "\n";
  const auto [status, summary, rows] = report("results_http", http_only);
  ASSERT_EQ(status, 0) << summary;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["bench"], "multiturn");
  EXPECT_EQ(rows[0]["device"], "NVIDIA H200");
  EXPECT_NE(summary.find("Device: NVIDIA H200; kvtrie commit abc1234"), std::string::npos) << summary;
}

}  // namespace
}  // namespace kvtrie::test
