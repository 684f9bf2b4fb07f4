// Contract: the pieces every kvtrie-bench subcommand shares: the result line (one JSON object on stdout per
// measurement, and the same numbers as a human row on stderr, so `kvtrie-bench ... > results.jsonl` keeps
// the machine output clean), medians, wall-clock timing and pseudo-random prompts. Free functions; the
// Row builder is a plain value. Single thread (the bench's main thread).
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops/matmul.h"
#include "kernels/vk/context.h"

namespace kvtrie::bench {

// Options every subcommand takes.
struct CommonOptions {
  int device = -1;       // Vulkan device index; -1: the default choice
  uint32_t repeats = 5;  // timed repeats (the median is reported)
  uint32_t warmup = 1;   // untimed runs first
};

// One measurement: ordered key/value pairs printed as one JSON line and one human row.
class Row {
 public:
  explicit Row(std::string_view bench);
  Row& text(std::string_view key, std::string_view value);
  Row& num(std::string_view key, double value);
  Row& integer(std::string_view key, int64_t value);
  // Prints the JSON line to stdout (flushed) and the human row to stderr.
  void emit() const;

 private:
  std::vector<std::pair<std::string, std::string>> json_;   // key, JSON-encoded value
  std::vector<std::pair<std::string, std::string>> human_;  // key, display value
};

double median(std::vector<double> values);
// Runs `run` common.warmup untimed times, then common.repeats timed ones; the median in seconds.
double median_seconds(const CommonOptions& common, const std::function<void()>& run);

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The Vulkan context options of a run: the --device choice.
vk::ContextOptions context_options(const CommonOptions& common);
// A shader_stats row per statistic of every pipeline `ctx` created (kernels' or bench's own shaders: the
// driver's names and values; needs ContextOptions::pipeline_statistics), or one row saying why there are
// none.
void emit_shader_stats(vk::Context& ctx);

// The numbers of a comma-separated list ("1,8,32"), for the sweeps' options.
std::vector<uint32_t> parse_numbers(const std::string& comma_separated);
// A tensor-core tile written SGMxSGNxTMxTN[kBK[bBUFFERS]] (e.g. 4x2x2x4k64b1); throws InputError.
kernels::CoopmatTile parse_coopmat_tile(const std::string& text);

// The items of a comma-separated list ("paged,probe1").
std::vector<std::string> split_list(const std::string& comma_separated);

// Deterministic token ids in [3, vocab) (skips <unk>, <s>, </s> of the built-in vocabulary).
std::vector<int32_t> pseudo_random_tokens(uint32_t count, uint64_t seed, uint32_t vocab);

// The model's label for result lines: the file name without .gguf.
std::string model_label(const std::filesystem::path& path);

}  // namespace kvtrie::bench
