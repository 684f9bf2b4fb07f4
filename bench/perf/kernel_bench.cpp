// kernel: one matrix product alone, dispatched many times in one recording, to separate a kernel's own
// speed from the per-dispatch cost of a whole forward pass. Two recordings of `dispatches` products each:
// "chained" writes one y every time (the recorder puts a barrier between dispatches, as in a forward pass)
// and "independent" writes a different y each time (no barriers). Also a chain of 4-byte fills, the
// per-dispatch cost of a barrier-separated dispatch that does (almost) nothing: a 4-float add. With
// --sync-groups, per grid size G the same levels of trivial dependent work as G work groups chained by
// barriers between dispatches (`dispatch_level_us`) and inside one dispatch through a grid-wide barrier
// (`grid_level_us`, grid_sync_probe): what fusing dependent levels into one dispatch could save.
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "bench/probes/grid_sync_probe.h"
#include "kernels/ops/add.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/matmul.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"
#include "kernels/vk/staging.h"

namespace kvtrie::bench {

namespace {

std::optional<kernels::MatmulPath> path_from(const std::string& name) {
  if (name == "auto") return kernels::MatmulPath::Auto;
  if (name == "deterministic") return kernels::MatmulPath::Deterministic;
  if (name == "tiled") return kernels::MatmulPath::Tiled;
  if (name == "coopmat") return kernels::MatmulPath::CoopMat;
  return std::nullopt;
}

}  // namespace

void run_kernel(const CommonOptions& common, const KernelOptions& options) {
  vk::Context ctx(context_options(common));
  const std::optional<TensorType> type = tensor_type_from_name(options.type);
  KVTRIE_CHECK(type.has_value(), "kernel: unknown --type " + options.type);
  const std::optional<kernels::MatmulPath> path = path_from(options.path);
  KVTRIE_CHECK(path.has_value(), "kernel: --path is auto, deterministic, tiled or coopmat");
  const kernels::Kernels k(ctx, kernels::Prewarm::No);

  // Random bytes: the timing does not depend on the values (no data-dependent branches).
  const uint64_t w_bytes = uint64_t{options.rows} * row_bytes(*type, options.cols);
  std::vector<uint8_t> host(w_bytes);
  std::mt19937_64 rng(1);
  for (auto& b : host) b = static_cast<uint8_t>(rng() & 0x3F);  // keeps f16 scales finite
  vk::Buffer w(ctx.device(), (w_bytes + 15) / 16 * 16 + 16, vk::MemoryKind::DeviceLocal);
  vk::upload(ctx, w, 0, std::as_bytes(std::span(host)));
  std::vector<float> xs(uint64_t{options.tokens} * options.cols, 0.5f);
  vk::Buffer x = vk::make_buffer(ctx, std::span<const float>(xs), vk::MemoryKind::DeviceLocal);
  const uint64_t y_bytes = uint64_t{options.tokens} * options.rows * 4;
  std::vector<vk::Buffer> ys;
  for (uint32_t i = 0; i < options.dispatches; ++i)
    ys.emplace_back(ctx.device(), y_bytes, vk::MemoryKind::DeviceLocal);
  vk::Buffer tiny(ctx.device(), 16, vk::MemoryKind::DeviceLocal);

  auto per_dispatch_us = [&](auto&& record) {
    vk::CommandRecorder rec(ctx);
    rec.begin();
    record(rec);
    rec.end();
    return median_seconds(common, [&] { rec.submit_and_wait(); }) / options.dispatches * 1e6;
  };
  auto product = [&](vk::CommandRecorder& rec, const vk::Buffer& y) {
    kernels::MatmulArgs a{
        {w.view(0, w_bytes), *type, options.rows, options.cols}, x.view(), y.view(), options.tokens};
    kernels::matmul(rec, k, a, *path);
  };
  const double chained = per_dispatch_us([&](vk::CommandRecorder& rec) {
    for (uint32_t i = 0; i < options.dispatches; ++i) product(rec, ys[0]);
  });
  const double independent = per_dispatch_us([&](vk::CommandRecorder& rec) {
    for (uint32_t i = 0; i < options.dispatches; ++i) product(rec, ys[i]);
  });
  const double empty = per_dispatch_us([&](vk::CommandRecorder& rec) {
    for (uint32_t i = 0; i < options.dispatches; ++i)
      kernels::add(rec, k, tiny.view(), tiny.view(), tiny.view(), 4);
  });
  Row("kernel")
      .text("device", ctx.device().info().name)
      .text("type", options.type)
      .text("path", options.path)
      .integer("rows", options.rows)
      .integer("cols", options.cols)
      .integer("tokens", options.tokens)
      .num("chained_us", chained)
      .num("independent_us", independent)
      .num("empty_add_us", empty)
      .num("weight_gbs_chained", static_cast<double>(w_bytes) / chained / 1e3)
      .num("weight_gbs_independent", static_cast<double>(w_bytes) / independent / 1e3)
      .num("tflops_independent", 2.0 * options.rows * options.cols * options.tokens / independent / 1e6)
      .emit();

  vk::Buffer sync(ctx.device(), 16, vk::MemoryKind::DeviceLocal);
  for (uint32_t groups : parse_numbers(options.sync_groups)) {
    vk::Buffer data(ctx.device(), uint64_t{groups} * 4, vk::MemoryKind::DeviceLocal);
    const double dispatch_level = per_dispatch_us([&](vk::CommandRecorder& rec) {
      for (uint32_t i = 0; i < options.dispatches; ++i)
        grid_sync_probe(rec, k, sync.view(), data.view(), groups, 1, false);
    });
    const double grid_level = per_dispatch_us([&](vk::CommandRecorder& rec) {
      rec.fill(sync.view(), 0);
      grid_sync_probe(rec, k, sync.view(), data.view(), groups, options.dispatches, true);
    });
    const std::vector<uint32_t> words = vk::download<uint32_t>(ctx, sync, 2);
    Row("grid_sync_probe")
        .text("device", ctx.device().info().name)
        .integer("groups", groups)
        .integer("levels", options.dispatches)
        .num("dispatch_level_us", dispatch_level)
        .num("grid_level_us", grid_level)
        .integer("timeouts", words[1])
        .emit();
  }
}

}  // namespace kvtrie::bench
