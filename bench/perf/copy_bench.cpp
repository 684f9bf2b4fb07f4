// copy and bandwidth: KV page copies between the tiers through VkPageStore (batches of whole pages, one
// recording per batch, waited for), against one plain vkCmdCopyBuffer of the same bytes; and a
// device-local to device-local copy as the device's memory-bandwidth probe.
#include <algorithm>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "bench/probes/read_probe.h"
#include "cache/vk_page_store.h"
#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"

namespace kvtrie::bench {

using Clock = std::chrono::steady_clock;

namespace {

// One whole-buffer copy, recorded once and replayed.
double plain_copy_seconds(vk::Context& ctx, const CommonOptions& common, const vk::Buffer& src,
                          const vk::Buffer& dst) {
  vk::CommandRecorder rec(ctx);
  rec.begin();
  rec.copy(src.view(), dst.view());
  rec.end();
  return median_seconds(common, [&] { rec.submit_and_wait(); });
}

}  // namespace

void run_copy(const CommonOptions& common, const CopyOptions& options) {
  vk::Context ctx(context_options(common));
  const kernels::KvLayout layout{options.layers, options.page_tokens, options.kv_dim};
  VkPageStore store(ctx, layout, options.pages, options.pages);
  const uint64_t bytes = uint64_t{options.pages} * layout.page_bytes();
  // Every page once per direction, in batches of `batch` pages, each batch waited for (as the cache does).
  auto pages_seconds = [&](Tier from, Tier to) {
    std::vector<PageCopy> batch;
    return median_seconds(common, [&] {
      for (uint32_t begin = 0; begin < options.pages; begin += options.batch) {
        batch.clear();
        for (uint32_t p = begin; p < std::min(options.pages, begin + options.batch); ++p)
          batch.push_back({from, p, to, p});
        store.copy(batch);
        store.wait();
      }
    });
  };
  const double to_host = pages_seconds(Tier::Device, Tier::Host);
  const double to_device = pages_seconds(Tier::Host, Tier::Device);
  vk::Buffer device_buffer(ctx.device(), bytes, vk::MemoryKind::DeviceLocal);
  vk::Buffer host_buffer(ctx.device(), bytes, vk::MemoryKind::HostCached);
  const double plain_to_host = plain_copy_seconds(ctx, common, device_buffer, host_buffer);
  const double plain_to_device = plain_copy_seconds(ctx, common, host_buffer, device_buffer);
  const auto gbs = [&](double s) { return static_cast<double>(bytes) / s / 1e9; };
  for (const bool down : {true, false}) {
    Row("copy")
        .text("device", ctx.device().info().name)
        .text("direction", down ? "device_to_host" : "host_to_device")
        .integer("pages", options.pages)
        .integer("batch", options.batch)
        .integer("page_bytes", static_cast<int64_t>(layout.page_bytes()))
        .num("pages_gbs", gbs(down ? to_host : to_device))
        .num("plain_gbs", gbs(down ? plain_to_host : plain_to_device))
        .num("pages_ms", (down ? to_host : to_device) * 1e3)
        .emit();
  }
}

void run_bandwidth(const CommonOptions& common, const BandwidthOptions& options) {
  vk::Context ctx(context_options(common));
  const uint64_t bytes = options.mib << 20;
  vk::Buffer a(ctx.device(), bytes, vk::MemoryKind::DeviceLocal);
  vk::Buffer b(ctx.device(), bytes, vk::MemoryKind::DeviceLocal);
  const double s = plain_copy_seconds(ctx, common, a, b);
  // A copy reads and writes every byte: 2 * bytes moved (the copy engine, not the shader cores).
  // The read probe is the decode step's bound: a shader reading every byte once, at several thread counts
  // and loads in flight a thread (a row each; the best is the bound).
  const kernels::Kernels k(ctx, kernels::Prewarm::No);
  double best_read = 0;
  uint32_t best_threads = 0, best_unroll = 0;
  for (uint32_t unroll : options.unrolls)
    for (uint32_t threads : {1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20}) {
      vk::Buffer sink(ctx.device(), uint64_t{threads} * 4 + 4096, vk::MemoryKind::DeviceLocal);
      vk::CommandRecorder rec(ctx);
      rec.begin();
      read_probe(rec, k, a.view(0, bytes / 16 * 16), sink.view(), threads, unroll);
      rec.end();
      const double r = static_cast<double>(bytes) / median_seconds(common, [&] { rec.submit_and_wait(); });
      Row("read_probe")
          .text("device", ctx.device().info().name)
          .integer("bytes", static_cast<int64_t>(bytes))
          .integer("threads", threads)
          .integer("unroll", unroll)
          .num("read_bytes_per_s", r)
          .emit();
      if (r > best_read) {
        best_read = r;
        best_threads = threads;
        best_unroll = unroll;
      }
    }
  Row("bandwidth")
      .text("device", ctx.device().info().name)
      .text("method", "vkCmdCopyBuffer device->device; read_probe shader")
      .integer("bytes", static_cast<int64_t>(bytes))
      .num("copy_ms", s * 1e3)
      .num("copy_rw_bytes_per_s", 2.0 * static_cast<double>(bytes) / s)
      .num("read_bytes_per_s", best_read)
      .integer("read_threads", best_threads)
      .integer("read_unroll", best_unroll)
      .emit();
}

}  // namespace kvtrie::bench
