#include "bench/perf/bench_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "bench/probes/bench_shaders.h"
#include "kernels/vk/context.h"
#include "kernels/vk/pipeline_statistics.h"
#include "kernels/vk/shader_registry.h"

namespace kvtrie::bench {

namespace {
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v, const char* format) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN/inf
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
}  // namespace

Row::Row(std::string_view bench) {
  text("bench", bench);
}

Row& Row::text(std::string_view key, std::string_view value) {
  json_.emplace_back(std::string(key), json_string(value));
  human_.emplace_back(std::string(key), std::string(value));
  return *this;
}

Row& Row::num(std::string_view key, double value) {
  json_.emplace_back(std::string(key), number(value, "%.6g"));
  human_.emplace_back(std::string(key), number(value, "%.4g"));
  return *this;
}

Row& Row::integer(std::string_view key, int64_t value) {
  json_.emplace_back(std::string(key), std::to_string(value));
  human_.emplace_back(std::string(key), std::to_string(value));
  return *this;
}

void Row::emit() const {
  // Appended piece by piece: `const char* + std::string&&` inserts at the front, and GCC 12 at -O3 reports a
  // bogus -Wrestrict for that insert (it cannot prove the literal and the string's buffer apart).
  std::string line = "{";
  for (size_t i = 0; i < json_.size(); ++i) {
    if (i) line += ',';
    line += json_string(json_[i].first);
    line += ':';
    line += json_[i].second;
  }
  line += "}\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
  std::string row = "|";
  for (const auto& [key, value] : human_) row += " " + key + "=" + value + " |";
  std::fprintf(stderr, "%s\n", row.c_str());
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double median_seconds(const CommonOptions& common, const std::function<void()>& run) {
  std::vector<double> s;
  for (uint32_t i = 0; i < common.warmup + common.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    if (i >= common.warmup) s.push_back(seconds_since(start));
  }
  return median(s);
}

std::vector<int32_t> pseudo_random_tokens(uint32_t count, uint64_t seed, uint32_t vocab) {
  std::vector<int32_t> out(count);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& t : out) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t = static_cast<int32_t>(3 + x % (vocab - 3));
  }
  return out;
}

std::string model_label(const std::filesystem::path& path) {
  return path.stem().string();
}

vk::ContextOptions context_options(const CommonOptions& common) {
  vk::ContextOptions co;
  if (common.device >= 0) co.device_index = static_cast<uint32_t>(common.device);
  return co;
}

std::vector<uint32_t> parse_numbers(const std::string& comma_separated) {
  std::vector<uint32_t> out;
  for (const std::string& item : split_list(comma_separated))
    out.push_back(static_cast<uint32_t>(std::stoul(item)));
  return out;
}

kernels::CoopmatTile parse_coopmat_tile(const std::string& text) {
  kernels::CoopmatTile t;
  const int n =
      std::sscanf(text.c_str(), "%ux%ux%ux%uk%ub%u", &t.sg_m, &t.sg_n, &t.tm, &t.tn, &t.bk, &t.buffers);
  if ((n != 4 && n != 5 && n != 6) || t.bk % 32 != 0 || (t.buffers != 1 && t.buffers != 2))
    throw InputError("a tile is SGMxSGNxTMxTN[kBK[bBUFFERS]], e.g. 4x2x2x4 or 4x2x2x4k64b1; got " + text);
  return t;
}

std::vector<std::string> split_list(const std::string& comma_separated) {
  std::vector<std::string> out;
  std::stringstream in(comma_separated);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// A shader_stats row per statistic of every pipeline the context created (the driver's names and values),
// kernels' or bench's own, or one row saying why there are none.
void emit_shader_stats(vk::Context& ctx) {
  if (!ctx.device().pipeline_statistics_enabled()) {
    Row("shader_stats")
        .text("error", "the device does not offer VK_KHR_pipeline_executable_properties")
        .emit();
    return;
  }
  for (const vk::PipelineKey& key : ctx.pipelines().keys()) {
    const vk::SpirvBlob* blob = vk::find_spirv(key.variant);
    if (blob == nullptr) blob = find_bench_spirv(key.variant);  // bench's own probes
    if (blob == nullptr) continue;
    std::string spec;
    for (const uint32_t v : key.spec) {  // piece by piece: "," + a temporary trips GCC 12's -O3 -Wrestrict
      if (!spec.empty()) spec += ',';
      spec += std::to_string(v);
    }
    for (const vk::ExecutableStatistic& s : vk::pipeline_statistics(ctx.device(), *blob, key.spec))
      Row("shader_stats")
          .text("pipeline", key.variant)
          .text("spec", spec)
          .text("executable", s.executable)
          .text("stat", s.name)
          .text("value", s.value)
          .emit();
  }
}

}  // namespace kvtrie::bench
