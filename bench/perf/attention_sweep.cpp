// sweep-attention: the decode attention of a model's shape (llama3-8b: 32 heads over 8 KV heads of 128,
// 32 layers; llama3-1b: head_dim 64, 16 layers) for `sequences` sequences of `context` tokens each, one
// query token a sequence, as a decode step runs it: the split pass and the combine pass (writing the o
// projection's quantized input) for every layer, chained, each layer reading its own K/V, at every --splits
// size. K/V hold f16 1.0 (the time does not depend on the values). A split-pass kernel under trial takes its
// place in attention() to be compared here (session 9's attention_decode: commit 0cc5eee); --variants takes
// attention.comp's probe builds, each leaving out one part of the split pass; "decode" runs the engine's
// decode pass (attention_decode), decode_<build> its tuning builds.
// Between layers a read of --evict-mib of device memory (read_probe) pushes the K/V out of the L2 cache, as
// a decode step's weight reads do. Times are the GPU timestamps around each dispatch (the recorder's
// profiling: its run plus the barrier before it), the split pass and the combine apart, per layer, the median
// of --repeats replays. One row per (context, sequences, variant, split): microseconds per layer and K/V
// GB/s.
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "bench/probes/bench_shaders.h"
#include "bench/probes/read_probe.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/quantized_x.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"
#include "kernels/vk/device.h"
#include "kernels/vk/query_pool.h"
#include "kernels/vk/staging.h"

namespace kvtrie::bench {

namespace {

struct AttentionShape {
  uint32_t n_heads, n_kv_heads, head_dim, layers;
};

AttentionShape attention_shape_of(const std::string& model) {
  if (model == "llama3-8b") return {32, 8, 128, 32};
  if (model == "llama3-1b") return {32, 8, 64, 16};
  throw InputError("sweep-attention: --model is llama3-8b or llama3-1b");
}

// attention.comp's tuning builds (bench/CMakeLists.txt: attention_probe1..5), a registration row of the
// sweep's own: Kernels never prewarms it.
constexpr std::string_view kProbes[] = {"probe1", "probe2", "probe3", "probe4", "probe5"};
vk::SpecConstants spec_probe(const vk::Device& d) {
  return {kernels::attention_workgroup_size(d)};
}
constexpr kernels::OpRegistration kAttentionProbe{.op = "attention_probe",
                                                  .variants = kProbes,
                                                  .spec = spec_probe,
                                                  .shader = "attention",
                                                  .spirv = find_bench_spirv};

// attention_decode.comp's builds for head_dim 128 on 32-lane subgroups, each with a number of subgroups a
// work group and KEY_LANES (specialization constants 0 and 1): the engine's d128 (kernels/), and bench's
// tuning builds (bench/CMakeLists.txt): probe1, probe2, probe5 without parts of the pass, vk4 loading V 4
// keys a round, p16 and p16vk4 with shared arrays for 16 subgroups.
template <uint32_t Subgroups, uint32_t KeyLanes>
vk::SpecConstants spec_decode(const vk::Device& d) {
  return {Subgroups * d.info().subgroup_size, KeyLanes};
}
constexpr std::string_view kDecodeProbes[] = {"probe1", "probe2", "probe5", "vk4"};
constexpr std::string_view kDecodeD128[] = {"d128"};
constexpr std::string_view kDecodeP16[] = {"p16", "p16vk4"};
constexpr kernels::OpRegistration kDecodeProbe{.op = "attention_decode_probe",
                                               .variants = kDecodeProbes,
                                               .spec = spec_decode<8, 1>,
                                               .shader = "attention_decode",
                                               .spirv = find_bench_spirv};
constexpr kernels::OpRegistration kDecodeP4{.op = "attention_decode_p4",
                                            .variants = kDecodeD128,
                                            .spec = spec_decode<4, 1>,
                                            .shader = "attention_decode"};
constexpr kernels::OpRegistration kDecodeP16Kl1{.op = "attention_decode_p16_kl1",
                                                .variants = kDecodeP16,
                                                .spec = spec_decode<16, 1>,
                                                .shader = "attention_decode",
                                                .spirv = find_bench_spirv};
constexpr kernels::OpRegistration kDecodeP16Kl2{.op = "attention_decode_p16_kl2",
                                                .variants = kDecodeP16,
                                                .spec = spec_decode<16, 2>,
                                                .shader = "attention_decode",
                                                .spirv = find_bench_spirv};
constexpr kernels::OpRegistration kDecodeP16Kl4{.op = "attention_decode_p16_kl4",
                                                .variants = kDecodeP16,
                                                .spec = spec_decode<16, 4>,
                                                .shader = "attention_decode",
                                                .spirv = find_bench_spirv};
struct DecodeVariant {
  std::string_view name;
  const kernels::OpRegistration* row;
  uint32_t variant;
};
constexpr DecodeVariant kDecodeVariants[] = {{"decode_probe1", &kDecodeProbe, 0},
                                             {"decode_probe2", &kDecodeProbe, 1},
                                             {"decode_probe5", &kDecodeProbe, 2},
                                             {"decode_vk4", &kDecodeProbe, 3},
                                             {"decode_p4", &kDecodeP4, 0},
                                             {"decode_p16_kl1", &kDecodeP16Kl1, 0},
                                             {"decode_p16vk4_kl1", &kDecodeP16Kl1, 1},
                                             {"decode_p16_kl2", &kDecodeP16Kl2, 0},
                                             {"decode_p16vk4_kl2", &kDecodeP16Kl2, 1},
                                             {"decode_p16_kl4", &kDecodeP16Kl4, 0},
                                             {"decode_p16vk4_kl4", &kDecodeP16Kl4, 1}};

// The lanes a key of a --variants name: decode_kl2 and decode_kl4 run the engine's decode pass with 2 or 4
// (AttentionArgs::decode_key_lanes), the p16 builds as named.
uint32_t key_lanes_of(const std::string& variant) {
  return variant.ends_with("_kl2") ? 2 : variant.ends_with("_kl4") ? 4 : 1;
}

// The split pass of a --variants name: nullptr for the engine's (paged, decode, decode_kl2, decode_kl4);
// decode_<build> runs that build of attention_decode, <name> attention.comp's probe.
const vk::ComputePipeline* split_pass(const kernels::Kernels& k, const std::string& variant) {
  if (variant == "paged" || variant == "decode" || variant == "decode_kl2" || variant == "decode_kl4")
    return nullptr;
  for (const DecodeVariant& v : kDecodeVariants)
    if (v.name == variant) return &k.pipeline(*v.row, v.variant);
  const auto it = std::find(std::begin(kProbes), std::end(kProbes), variant);
  if (it == std::end(kProbes)) throw InputError("sweep-attention: unknown --variants entry " + variant);
  return &k.pipeline(kAttentionProbe, static_cast<uint32_t>(it - std::begin(kProbes)));
}

constexpr uint32_t kPageTokens = 16;
constexpr uint64_t kBindingBytes = uint64_t{2} << 30;  // pool bindings of at most 2 GiB

}  // namespace

void run_sweep_attention(const CommonOptions& common, const SweepAttentionOptions& options) {
  vk::Context ctx(context_options(common));
  const kernels::Kernels k(ctx, kernels::Prewarm::No);
  const vk::Device& dev = ctx.device();
  const AttentionShape shape = attention_shape_of(options.model);
  const kernels::KvLayout layout{shape.layers, kPageTokens, shape.n_kv_heads * shape.head_dim};
  const uint64_t page_bytes = layout.page_elements() * 2;
  const uint32_t width = shape.n_heads * shape.head_dim;
  vk::QueryPool queries(dev, 4 * shape.layers + 8);
  std::optional<vk::Buffer> evict;
  if (options.evict_mib) evict.emplace(dev, options.evict_mib << 20, vk::MemoryKind::DeviceLocal);
  constexpr uint32_t kProbeThreads = 1 << 16;
  vk::Buffer sink(dev, kProbeThreads * 4, vk::MemoryKind::DeviceLocal);

  for (uint32_t sequences : parse_numbers(options.sequences))
    for (uint32_t context : parse_numbers(options.contexts)) {
      const uint32_t seq_pages = (context + kPageTokens - 1) / kPageTokens;
      const uint32_t pages = seq_pages * sequences;
      const auto per_binding = static_cast<uint32_t>(kBindingBytes / page_bytes);
      const uint32_t bindings = (pages + per_binding - 1) / per_binding;
      if (bindings > 4) {
        std::fprintf(stderr, "sweep-attention: %u sequences of %u tokens need more than 8 GiB; skipped\n",
                     sequences, context);
        continue;
      }
      std::vector<vk::Buffer> pools;
      for (uint32_t b = 0; b < bindings; ++b) {
        const uint32_t n = std::min(per_binding, pages - b * per_binding);
        pools.emplace_back(dev, n * page_bytes, vk::MemoryKind::DeviceLocal);
      }
      std::vector<uint32_t> table(pages), info;
      for (uint32_t p = 0; p < pages; ++p) table[p] = p;
      for (uint32_t s = 0; s < sequences; ++s) info.insert(info.end(), {s * seq_pages, context - 1});
      std::vector<float> qs(uint64_t{sequences} * width, 0.5f);
      vk::Buffer q = vk::make_buffer(ctx, std::span<const float>(qs), vk::MemoryKind::DeviceLocal);
      vk::Buffer pt = vk::make_buffer(ctx, std::span<const uint32_t>(table), vk::MemoryKind::DeviceLocal);
      vk::Buffer ti = vk::make_buffer(ctx, std::span<const uint32_t>(info), vk::MemoryKind::DeviceLocal);
      vk::Buffer out(dev, uint64_t{sequences} * width * 4, vk::MemoryKind::DeviceLocal);
      const kernels::QuantizedBuffers oq(dev, sequences, width, false);
      {
        vk::CommandRecorder rec(ctx);
        rec.begin();
        for (const vk::Buffer& p : pools) rec.fill(p.view(), 0x3C003C00u);  // f16 1.0 pairs
        rec.end();
        rec.submit_and_wait();
      }

      auto args_for = [&](uint32_t split) {
        kernels::AttentionArgs a;
        a.q = q.view();
        a.kv_pages = pools[0].view();
        if (bindings > 1) {
          a.pages_per_binding = per_binding;
          for (uint32_t b = 1; b < bindings; ++b) a.kv_pages_more[b - 1] = pools[b].view();
        }
        a.page_table = pt.view();
        a.token_info = ti.view();
        a.out = out.view();
        a.tokens = sequences;
        a.n_heads = shape.n_heads;
        a.n_kv_heads = shape.n_kv_heads;
        a.head_dim = shape.head_dim;
        a.layout = layout;
        a.max_position = context - 1;
        a.split_size = split;
        a.quantized_out = oq.view();
        return a;
      };
      // {split pass, combine} microseconds a layer: medians over rounds of the summed timestamps.
      // A counter per (token, query head) at most, left at zero by every merge.
      const std::vector<uint32_t> zeros(uint64_t{sequences} * shape.n_heads, 0);
      vk::Buffer counters =
          vk::make_buffer(ctx, std::span<const uint32_t>(zeros), vk::MemoryKind::DeviceLocal);
      auto time_layer_us = [&](uint32_t split, const std::string& variant) {
        kernels::AttentionArgs a = args_for(split);
        a.decode = variant.starts_with("decode");
        a.decode_key_lanes = key_lanes_of(variant);
        if (a.decode && options.merge_in_pass) a.split_counters = counters.view();
        vk::Buffer scratch(dev, kernels::attention_scratch_bytes(a), vk::MemoryKind::DeviceLocal);
        a.scratch = scratch.view();
        vk::CommandRecorder rec(ctx);
        rec.set_profiling(&queries);
        rec.begin();
        for (uint32_t l = 0; l < shape.layers; ++l) {
          if (evict) read_probe(rec, k, evict->view(), sink.view(), kProbeThreads);
          a.layer = l;
          if (const vk::ComputePipeline* probe = split_pass(k, variant))
            kernels::attention(rec, k, a, *probe);
          else
            kernels::attention(rec, k, a);
        }
        rec.end();
        std::vector<double> split_us, combine_us;
        for (uint32_t r = 0; r < common.warmup + common.repeats; ++r) {
          rec.submit_and_wait();
          if (r < common.warmup) continue;
          double sp = 0, cb = 0;
          for (const vk::DispatchTime& d : rec.dispatch_times())
            if (d.name->find("read_probe") == std::string::npos)
              (d.name->find("combine") != std::string::npos ? cb : sp) += d.ns;
          split_us.push_back(sp / shape.layers / 1e3);
          combine_us.push_back(cb / shape.layers / 1e3);
        }
        return std::pair{median(split_us), median(combine_us)};
      };
      auto emit = [&](const std::string& variant, uint32_t split, std::pair<double, double> t) {
        const double us = t.first + t.second;
        const double kv_bytes = 2.0 * context * layout.kv_dim * 2 * sequences;  // K and V of one layer
        Row("sweep_attention")
            .text("device", dev.info().name)
            .text("model", options.model)
            .integer("context", context)
            .integer("sequences", sequences)
            .text("variant", variant)
            .integer("split", split)
            .integer("merged_in_pass", options.merge_in_pass && variant.starts_with("decode") ? 1 : 0)
            .num("us", us)
            .num("split_us", t.first)
            .num("combine_us", t.second)
            .num("kv_gbs", kv_bytes / us / 1e3)
            .emit();
      };
      for (const std::string& variant : split_list(options.variants))
        for (uint32_t split : parse_numbers(options.splits))
          if (split <= context) emit(variant, split, time_layer_us(split, variant));
    }
}

}  // namespace kvtrie::bench
