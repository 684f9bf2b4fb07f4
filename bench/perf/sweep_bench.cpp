// The tuning harnesses of the matrix products (sweep-matvec, sweep-matmul).
//
// sweep-matvec: the decode products. For each weight type and each product shape of a
// model (llama3-8b or llama3-1b: Q/K/V joined, O, gate/up joined with SwiGLU, down, logits), it times the
// products the forward pass can use, chained with a barrier between dispatches as in a forward pass:
//   legacy: matvec.comp (one f32 decode per weight; the path before matvec_q8), and
//   q8 <rows>: matvec_q8 built with that many rows per lane (a specialization constant), with the token
//   grouping of the engine (1 token alone, 8 per work group for batches), on x quantized ahead (untimed).
// Each timed dispatch reads another copy of the weights (copies rotate through --rotate-mib of device
// memory), so products stream from memory as in a real step instead of from the L2 cache. One row per
// (type, shape, tokens, variant): microseconds per dispatch and weight GB/s. The variant "read" is the floor
// of a dispatch that reads those bytes and does nothing else (read_probe over the same copies, chained the
// same way; "read4" with four loads a thread in flight): what a product of that size could take at best.
// With --independent every dispatch writes outputs of its own, so no barrier separates them and they
// overlap: the products' time without a level's drain and launch, as a bound on what overlapping levels
// could give.
//
// sweep-matmul: the prefill products of the same shapes for a prompt chunk of --tokens, on the tensor-core
// path (matmul_coopmat) built with each tile of --tiles (sg_m x sg_n subgroups of tm x tn 16x16 blocks:
// specialization constants), with NV and, where the device and build have it, KHR cooperative matrices
// (KHR-xh: the build reading x as f16, converted beforehand), and on matmul_cm2 (VK_NV_cooperative_matrix2,
// extension CM2, x converted to f16) built with each tile of
// --cm2-tiles. Gate and up are timed as one product of n_ff rows, as prefill runs them.
// One row per (type, shape, extension, tile): microseconds per product and TFLOP/s.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "bench/probes/bench_shaders.h"
#include "bench/probes/read_probe.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/matmul.h"
#include "kernels/ops/matvec.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/ops/weight_format.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"
#include "kernels/vk/device.h"
#include "kernels/vk/shader_registry.h"
#include "kernels/vk/staging.h"
#include "runner/model/quantization.h"

namespace kvtrie::bench {

namespace {

// A pipeline of kernels' SPIR-V or, for the tuning probes (noload, nomul), bench's own.
const vk::ComputePipeline& pipeline_of(vk::Context& ctx, const std::string& variant,
                                       const vk::SpecConstants& spec) {
  if (const vk::SpirvBlob* probe = find_bench_spirv(variant)) return ctx.pipelines().get(*probe, spec);
  return ctx.pipelines().get(variant, spec);
}
// Whether this build embeds the variant, in kernels/ or as bench's probe (what pipeline_of can make).
bool embedded(const std::string& variant) {
  return vk::find_spirv(variant) != nullptr || find_bench_spirv(variant) != nullptr;
}

struct Shape {
  const char* name;
  uint32_t rows, cols;  // weight rows (gate/up: both halves) and row length
  const char* mode;     // matvec_q8 fold: store, norm, acc, norm_swiglu
};

std::vector<Shape> shapes_of(const std::string& model) {
  if (model == "llama3-8b")
    return {{"qkv", 6144, 4096, "norm"},
            {"o", 4096, 4096, "acc"},
            {"gate_up", 28672, 4096, "norm_swiglu"},
            {"down", 4096, 14336, "acc"},
            {"logits", 128256, 4096, "norm"}};
  if (model == "llama3-1b")
    return {{"qkv", 3072, 2048, "norm"},
            {"o", 2048, 2048, "acc"},
            {"gate_up", 16384, 2048, "norm_swiglu"},
            {"down", 2048, 8192, "acc"},
            {"logits", 128256, 2048, "norm"}};
  throw InputError("sweep-matvec: --model is llama3-8b or llama3-1b");
}

// Whether `name` is an item of the comma-separated `list`.
bool listed(const std::string& list, const std::string& name) {
  return std::ranges::count(split_list(list), name) != 0;
}

}  // namespace

void run_sweep_matvec(const CommonOptions& common, const SweepMatvecOptions& options) {
  vk::ContextOptions context_opts = context_options(common);
  context_opts.pipeline_statistics = options.shader_stats;
  vk::Context ctx(context_opts);
  const kernels::Kernels k(ctx, kernels::Prewarm::No);
  const vk::Device& dev = ctx.device();
  const std::vector<uint32_t> token_counts = parse_numbers(options.tokens);
  const std::vector<uint32_t> rows_per_lane = parse_numbers(options.rows_per_lane);
  const std::vector<uint32_t> threads_per_row = parse_numbers(options.threads_per_row);
  const std::vector<uint32_t> workgroups = parse_numbers(options.workgroups);
  std::mt19937_64 rng(7);

  for (const std::string& type_name :
       {std::string("Q4_0"), std::string("Q4_K"), std::string("Q8_0"), std::string("Q6_K")}) {
    if (options.types.find(type_name) == std::string::npos) continue;
    const TensorType file_type = *tensor_type_from_name(type_name);
    for (Shape shape : shapes_of(options.model)) {
      if (!options.shapes.empty() && !listed(options.shapes, shape.name)) continue;
      if (!options.mode.empty()) shape.mode = options.mode.c_str();
      const TensorType format = kernels::device_format(file_type, shape.cols);
      const uint64_t bytes = row_bytes(file_type, shape.cols) * shape.rows;
      // Copies of random weights (scales kept finite: bytes below 0x40) in the device format, side by side
      // in one large buffer as the engine's weight blocks are (a first version with one allocation per
      // copy measured every kernel 3-5x slower on an H100 than the same kernel inside a forward pass).
      const auto copies =
          static_cast<uint32_t>(std::clamp<uint64_t>((options.rotate_mib << 20) / bytes + 1, 2, 64));
      const uint64_t stride = (bytes + 255) / 256 * 256;
      vk::Buffer all(dev, stride * copies + 16, vk::MemoryKind::DeviceLocal);
      std::vector<uint8_t> host(bytes);
      for (auto& b : host) b = static_cast<uint8_t>(rng() & 0x3F);
      {
        vk::Uploader up(ctx);
        for (uint32_t c = 0; c < copies; ++c) up.upload(all, c * stride, std::as_bytes(std::span(host)));
        up.finish();
        vk::CommandRecorder rec(ctx);
        rec.begin();
        for (uint32_t c = 0; c < copies; ++c)
          kernels::repack_to_device_format(rec, k, all.view(c * stride, bytes), file_type, shape.rows,
                                           shape.cols);
        rec.end();
        rec.submit_and_wait();
      }
      const uint32_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
      std::vector<float> xs(uint64_t{max_tokens} * shape.cols);
      for (float& v : xs) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
      vk::Buffer x = vk::make_buffer(ctx, std::span<const float>(xs), vk::MemoryKind::DeviceLocal);
      std::vector<float> ones(std::max(shape.cols, shape.rows), 1.0f);
      vk::Buffer norm = vk::make_buffer(ctx, std::span<const float>(ones), vk::MemoryKind::DeviceLocal);
      // One output a dispatch with --independent (no barriers between them), else one for all.
      const uint32_t outputs = options.independent ? options.dispatches : 1;
      std::vector<vk::Buffer> ys;
      for (uint32_t i = 0; i < outputs; ++i)
        ys.emplace_back(dev, uint64_t{max_tokens} * shape.rows * 4 + 16, vk::MemoryKind::DeviceLocal);
      // x quantized once ahead (quantize_q8, untimed), as the forward pass does before its products; the
      // SwiGLU product also writes its output quantized, and acc_qnorm the new y normed, as the forward pass
      // has them do.
      const std::string_view mode = shape.mode;
      const bool normed = mode == "norm" || mode == "norm_swiglu";
      const uint32_t q_stride = (shape.cols + 15) / 16 * 16, out_stride = (shape.rows + 15) / 16 * 16;
      const kernels::QuantizedBuffers xq(dev, max_tokens, q_stride, true);
      std::vector<kernels::QuantizedBuffers> oqs;
      for (uint32_t i = 0; i < outputs; ++i) oqs.emplace_back(dev, max_tokens, out_stride, true);
      const kernels::QuantizedX quantized = xq.view();
      {
        kernels::QuantizeQ8Args qa;
        qa.x = x.view();
        qa.tokens = max_tokens;
        qa.cols = shape.cols;
        if (normed) qa.norm_weight = norm.view(0, uint64_t{shape.cols} * 4);
        qa.out = quantized;
        vk::CommandRecorder rec(ctx);
        rec.begin();
        kernels::quantize_q8(rec, k, qa);
        rec.end();
        rec.submit_and_wait();
      }

      auto time_us = [&](auto&& record_one) {
        vk::CommandRecorder rec(ctx);
        rec.begin();
        for (uint32_t i = 0; i < options.dispatches; ++i)
          record_one(rec, all.view((i % copies) * stride, bytes), i % outputs);
        rec.end();
        return median_seconds(common, [&] { rec.submit_and_wait(); }) / options.dispatches * 1e6;
      };
      auto emit = [&](uint32_t tokens, const std::string& variant, double us, double legacy_us) {
        Row("sweep_matvec")
            .text("device", dev.info().name)
            .text("model", options.model)
            .text("type", type_name)
            .text("format", kernels::type_variant(format))
            .text("shape", shape.name)
            .integer("rows", shape.rows)
            .integer("cols", shape.cols)
            .integer("tokens", tokens)
            .text("variant", variant)
            .integer("independent", options.independent ? 1 : 0)
            .num("us", us)
            .num("weight_gbs", static_cast<double>(bytes) / us / 1e3)
            .num("speedup_vs_legacy", legacy_us / us)
            .emit();
      };
      for (uint32_t tokens : token_counts) {
        const kernels::WeightMatrix base{{}, format, shape.rows, shape.cols};
        // The legacy product (no folds: what it costs alone).
        const double legacy = time_us([&](vk::CommandRecorder& rec, vk::BufferView wb, uint32_t o) {
          kernels::WeightMatrix m = base;
          m.data = wb;
          const kernels::MatmulArgs a{m, x.view(), ys[o].view(), tokens};
          if (tokens == 1)
            kernels::matvec_single_token(rec, k, a);
          else
            kernels::matvec(rec, k, a);
        });
        emit(tokens, "legacy", legacy, legacy);
        const uint32_t probe_threads = 1u << 18;
        std::vector<vk::Buffer> sinks;
        for (uint32_t i = 0; i < outputs; ++i)
          sinks.emplace_back(dev, uint64_t{read_probe_invocations(k, probe_threads)} * 4,
                             vk::MemoryKind::DeviceLocal);
        for (const uint32_t unroll : {1u, 4u}) {  // "read": one load a thread in flight; "read4": four
          const double read_us = time_us([&](vk::CommandRecorder& rec, vk::BufferView wb, uint32_t o) {
            read_probe(rec, k, wb.sub(0, bytes / 16 * 16), sinks[o].view(), probe_threads, unroll);
          });
          emit(tokens, unroll == 1 ? "read" : "read4", read_us, legacy);
        }
        if (!kernels::matvec_q8_supported(format, shape.cols)) continue;
        const bool want_portable =
            options.variants.find("q8,") != std::string::npos || options.variants.ends_with("q8");
        const uint32_t group = tokens == 1 ? 1 : 8;
        for (const bool int_dot : {false, true}) {
          // --probe: bench's tuning build of that name (matvec_q8i_<probe>_<mode>_<type>) instead.
          const std::string prefix = std::string(int_dot ? "matvec_q8i_" : "matvec_q8_") +
                                     (options.probe.empty() ? "" : options.probe + "_");
          const std::string variant = prefix + shape.mode + "_" + kernels::type_variant(format);
          if (int_dot && !dev.int_dot_enabled()) continue;
          if (!int_dot && !options.probe.empty()) continue;
          if (!int_dot && !want_portable) continue;
          for (uint32_t rpl : rows_per_lane)
            for (uint32_t tpr : threads_per_row)
              for (uint32_t wg : workgroups) {
                kernels::MatvecQ8Shape s =
                    kernels::matvec_q8_shape(dev, format, shape.rows, group, mode == "norm_swiglu");
                s.rows_per_lane = rpl;
                if (wg != 0) {
                  if (wg > dev.info().max_workgroup_size_x || wg % dev.subgroup_size() != 0) continue;
                  s.workgroup = wg;
                }
                if (tpr != 0) {
                  if (tpr > s.workgroup || tpr < dev.subgroup_size() || tpr * 32 > shape.cols * s.workgroup)
                    continue;
                  s.threads_per_row = tpr;
                }
                // A SwiGLU product writes its output quantized where its work groups make whole groups of 16;
                // acc_qnorm always does (shapes without whole groups are left out).
                const bool whole_groups = s.workgroup / s.threads_per_row * rpl % 16 == 0;
                const bool qout = (mode == "norm_swiglu" || mode == "acc_qnorm") && whole_groups;
                if (mode == "acc_qnorm" && !qout) continue;
                const std::string built = qout && mode == "norm_swiglu"
                                              ? prefix + "norm_swiglu_qout_" + kernels::type_variant(format)
                                              : variant;
                if (!embedded(built)) continue;  // a build this compiler or probe set lacks
                const vk::ComputePipeline& p = pipeline_of(
                    ctx, built, {s.workgroup, rpl, group, s.workgroup / std::max(dev.subgroup_size(), 1u)});
                const double us = time_us([&](vk::CommandRecorder& rec, vk::BufferView wb, uint32_t o) {
                  kernels::MatvecQ8Args a;
                  a.product = {{wb, format, shape.rows, shape.cols}, {}, ys[o].view(), tokens};
                  a.x = quantized;
                  a.norm = normed;
                  a.accumulate = mode == "acc" || mode == "acc_qnorm";
                  a.swiglu = mode == "norm_swiglu";
                  if (qout) a.quantized_out = oqs[o].view();
                  if (mode == "acc_qnorm") a.out_norm = norm.view(0, uint64_t{shape.rows} * 4);
                  kernels::dispatch_matvec_q8(rec, k, a, p, s, group);
                });
                // Appended piece by piece: "x" + a temporary trips GCC 12's -O3 -Wrestrict.
                std::string name = int_dot ? "q8i" : "q8";
                if (!options.probe.empty()) {
                  name += ' ';
                  name += options.probe;
                }
                name += " rows ";
                name += std::to_string(rpl);
                name += " tpr ";
                name += std::to_string(s.threads_per_row);
                name += " wg ";
                name += std::to_string(s.workgroup);
                emit(tokens, name, us, legacy);
              }
        }
      }
    }
  }
  if (options.shader_stats) emit_shader_stats(ctx);
}

void run_sweep_matmul(const CommonOptions& common, const SweepMatmulOptions& options) {
  vk::Context ctx(context_options(common));
  const kernels::Kernels k(ctx, kernels::Prewarm::No);
  const vk::Device& dev = ctx.device();
  KVTRIE_CHECK(kernels::coopmat_supported(dev), "sweep-matmul: the device has no cooperative matrices");
  std::vector<kernels::CoopmatTile> tiles;
  for (const std::string& item : split_list(options.tiles)) {
    const kernels::CoopmatTile t = parse_coopmat_tile(item);
    if (t.shared_bytes() > dev.info().max_shared_memory) {  // left out, so one tile does not end the sweep
      std::cerr << "sweep-matmul: tile " << item << " needs " << t.shared_bytes()
                << " bytes of shared memory, " << dev.info().max_shared_memory << " available: left out\n";
      continue;
    }
    tiles.push_back(t);
  }
  // k splits per tile (1: none; 0: coopmat_k_splits' own choice)
  const std::vector<uint32_t> split_counts = parse_numbers(options.k_splits);
  KVTRIE_CHECK(!split_counts.empty(), "sweep-matmul: --k-splits lists at least one count");
  std::vector<kernels::Cm2Tile> cm2_tiles;
  for (const std::string& item : split_list(options.cm2_tiles)) {
    kernels::Cm2Tile t;
    const int n = std::sscanf(item.c_str(), "%ux%ux%uk%u", &t.threads, &t.rows, &t.tokens, &t.bk);
    KVTRIE_CHECK(n == 4 && 256 % t.bk == 0,
                 "sweep-matmul: a CM2 tile is THREADSxROWSxTOKENSkBK, e.g. 256x128x128k32");
    cm2_tiles.push_back(t);
  }
  std::mt19937_64 rng(11);
  for (const uint32_t T : parse_numbers(options.tokens))
    for (const std::string& type_name :
         {std::string("Q4_0"), std::string("Q4_K"), std::string("Q8_0"), std::string("Q6_K")}) {
      if (options.types.find(type_name) == std::string::npos) continue;
      const TensorType file_type = *tensor_type_from_name(type_name);
      for (Shape shape : shapes_of(options.model)) {
        if (std::string_view(shape.name) == "logits") continue;  // prefill reads logits of one token
        // Prefill multiplies gate and up separately (GpuModel joins them only for matvec_q8): time one.
        if (std::string_view(shape.name) == "gate_up")
          shape = Shape{"gate", shape.rows / 2, shape.cols, shape.mode};
        const TensorType format = kernels::device_format(file_type, shape.cols);
        const uint64_t bytes = row_bytes(file_type, shape.cols) * shape.rows;
        vk::Buffer w(dev, bytes + 16, vk::MemoryKind::DeviceLocal);
        std::vector<uint8_t> host(bytes);
        for (auto& b : host) b = static_cast<uint8_t>(rng() & 0x3F);
        vk::upload(ctx, w, 0, std::as_bytes(std::span(host)));
        {
          vk::CommandRecorder rec(ctx);
          rec.begin();
          kernels::repack_to_device_format(rec, k, w.view(0, bytes), file_type, shape.rows, shape.cols);
          rec.end();
          rec.submit_and_wait();
        }
        std::vector<float> xs(uint64_t{T} * shape.cols);
        for (float& v : xs) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
        vk::Buffer x = vk::make_buffer(ctx, std::span<const float>(xs), vk::MemoryKind::DeviceLocal);
        vk::Buffer y(dev, uint64_t{T} * shape.rows * 4 + 16, vk::MemoryKind::DeviceLocal);
        const uint32_t most_splits = *std::max_element(split_counts.begin(), split_counts.end());
        vk::Buffer split_scratch(dev,
                                 kernels::split_scratch_floats(T, shape.rows, std::max(most_splits, 1u)) * 4,
                                 vk::MemoryKind::DeviceLocal);
        const kernels::MatmulArgs args{
            {w.view(0, bytes), format, shape.rows, shape.cols}, x.view(), y.view(), T};
        // Times --dispatches products recorded by `record` in one recording and emits the row.
        const auto measure = [&](const std::string& ext, const std::string& tile, auto record) {
          vk::CommandRecorder rec(ctx);
          rec.begin();
          for (uint32_t i = 0; i < options.dispatches; ++i) record(rec);
          rec.end();
          const double us = median_seconds(common, [&] { rec.submit_and_wait(); }) / options.dispatches * 1e6;
          Row("sweep_matmul")
              .text("device", dev.info().name)
              .text("model", options.model)
              .text("type", type_name)
              .text("shape", shape.name)
              .integer("rows", shape.rows)
              .integer("cols", shape.cols)
              .integer("tokens", T)
              .text("extension", ext)
              .text("tile", tile)
              .num("us", us)
              .num("tflops", 2.0 * shape.rows * shape.cols * T / us / 1e6)
              .emit();
        };
        // x as f16 (converted beforehand, as GpuModel does) for KHR-xh and CM2.
        std::vector<uint16_t> xh(xs.size());
        for (size_t i = 0; i < xs.size(); ++i) xh[i] = fp32_to_fp16(xs[i]);
        vk::Buffer x16 = vk::make_buffer(ctx, std::span<const uint16_t>(xh), vk::MemoryKind::DeviceLocal);
        for (const std::string ext : {"NV", "KHR", "KHR-xh", "KHR-noload", "KHR-nomul"}) {
          if (!listed(options.extensions, ext)) continue;
          const bool khr = ext != "NV";
          const std::string variant = ext == "KHR-noload"  ? "noload_"
                                      : ext == "KHR-nomul" ? "nomul_"
                                      : ext == "KHR-xh"    ? "xh_"
                                                           : "";
          const std::string shader = std::string(khr ? "matmul_coopmat_khr_" : "matmul_coopmat_") + variant +
                                     kernels::type_variant(format);
          if (khr && (!dev.khr_coopmat_enabled() || !embedded(shader))) continue;
          kernels::MatmulArgs a = args;
          if (ext == "KHR-xh") a.x = x16.view();
          a.split_scratch = split_scratch.view();
          for (const kernels::CoopmatTile& t : tiles) {
            const vk::ComputePipeline& p = pipeline_of(ctx, shader, t.spec());
            for (const uint32_t splits : split_counts) {
              a.k_splits = splits;
              const uint32_t made = kernels::coopmat_k_splits(a, t);
              std::string name = std::to_string(t.sg_m) + "x" + std::to_string(t.sg_n) + "x" +
                                 std::to_string(t.tm) + "x" + std::to_string(t.tn) + "k" +
                                 std::to_string(t.bk) + "b" + std::to_string(t.buffers);
              if (made > 1) {  // appended piece by piece: "s" + a temporary trips GCC 12's -O3 -Wrestrict
                name += 's';
                name += std::to_string(made);
              }
              measure(ext, name,
                      [&](vk::CommandRecorder& rec) { kernels::dispatch_matmul_coopmat(rec, k, a, p, t); });
            }
          }
        }
        if (listed(options.extensions, "CM2") && kernels::coopmat2_takes(dev, format)) {
          kernels::MatmulArgs a = args;
          a.x_f16 = x16.view();
          for (const kernels::Cm2Tile& t : cm2_tiles) {
            const vk::ComputePipeline& p =
                ctx.pipelines().get("matmul_cm2_" + std::string(kernels::type_variant(format)), t.spec());
            measure("CM2",
                    std::to_string(t.threads) + "x" + std::to_string(t.rows) + "x" +
                        std::to_string(t.tokens) + "k" + std::to_string(t.bk),
                    [&](vk::CommandRecorder& rec) { kernels::dispatch_matmul_cm2(rec, k, a, p, t); });
          }
        }
      }
    }
}

}  // namespace kvtrie::bench
