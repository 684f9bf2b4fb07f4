#include "runner/engine/gpu_engine.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "base/error.h"
#include "kernels/vk/pipeline_cache_file.h"
#include "runner/engine/admission.h"
#include "runner/engine/gpu_engine_state.h"
#include "runner/engine/kv_tier_sizing.h"
#include "runner/model/model_fingerprint.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::engine {

GpuEngine::State::State(vk::Context& context, const GgufFile& file, const ModelConfig& mc,
                        const Tokenizer& tok, const GpuEngineConfig& cfg, const GpuModelOptions& options,
                        uint32_t device_pages, uint32_t host_pages, std::future<uint64_t> disk_fingerprint)
    : tokenizer(tok),
      config(cfg),
      model(context, file, mc, options),
      pages(context, model.kv_layout(), device_pages, host_pages, page_store_options(model, cfg)),
      cache(KvCacheConfig{cfg.page_tokens, model.kv_layout().page_bytes(),
                          uint64_t{device_pages} * model.kv_layout().page_bytes(),
                          uint64_t{host_pages} * model.kv_layout().page_bytes(), cfg.tenant_kv_share},
            pages),
      // Rejected at submit: a request that would not fit the whole device tier even alone.
      queue(info, [this, device_pages](const GenerateRequest& r) {
        return never_fits(r.prompt.size(), r.max_tokens, config.n_ctx, config.page_tokens, device_pages);
      }) {
  model.bind_pages(pages);
  cache.set_event_sink(cfg.kv_events);
  if (!cfg.kv_disk_dir.empty() && cfg.kv_disk_bytes > 0) {
    DiskPageStoreConfig dc;
    dc.dir = cfg.kv_disk_dir;
    dc.budget_bytes = cfg.kv_disk_bytes;
    dc.read_delay = cfg.kv_disk_read_delay;
    dc.reader_threads = cfg.kv_disk_readers;
    dc.fingerprint = disk_fingerprint.get();
    dc.page_tokens = cfg.page_tokens;
    dc.page_bytes = model.kv_layout().page_bytes();
    disk = std::make_unique<DiskPageStore>(dc);
    if (host_pages == 0) spdlog::warn("kv disk tier unused: it needs a host tier (--kv-host-mb)");
    cache.attach_disk_tier(*disk, pages);
  }
  // The host tier's first chunks are committed before the first request (while the disk tier's fingerprint
  // was computed, if any): pinned beside its steps, they slowed the first requests of a fresh process by
  // 37-144 ms (session 25), and a disk hit after a restart reads into them.
  const auto waiting_since = Clock::now();
  pages.wait_for_host_commits();
  log_load(context, ms_between(waiting_since, Clock::now()));
}

// The load's one info line: the weights' upload (upload_weights), the pipelines (PipelineCache) and the KV
// tiers, the load's last step.
void GpuEngine::State::log_load(vk::Context& context, double host_commit_wait_ms) const {
  const WeightsLoadReport& r = model.weights_load_report();
  const vk::PipelineCacheStats& p = context.pipelines().stats();
  const uint64_t page_bytes = model.kv_layout().page_bytes();
  uint64_t device_pages = 0, host_pages = 0;
  for (const PageChunk& c : pages.device_chunks()) device_pages += c.page_count;
  for (const PageChunk& c : pages.host_chunks()) host_pages += c.page_count;
  spdlog::info(
      "load: weights {:.2f} GB in {:.0f} ms ({:.1f} GB/s, {} tensors, {} blocks; staging copy {:.0f} ms, "
      "GPU wait {:.0f} ms) | pipelines {} ({} in background, {:.0f} ms, load waited {:.0f} ms; disk cache "
      "{}) | kv device {} MiB in {:.0f} ms, host {} MiB committed in chunks of {} pages, {} ahead of use "
      "(load waited {:.0f} ms)",
      static_cast<double>(r.weight_bytes) / 1e9, r.weights_ms,
      r.weights_ms > 0 ? static_cast<double>(r.weight_bytes) / 1e6 / r.weights_ms : 0.0, r.weight_tensors,
      r.weight_blocks, r.upload_copy_ms, r.upload_wait_ms, p.created, p.background_created, p.background_ms,
      r.pipeline_wait_ms, vk::cache_file_status_name(p.file_status), device_pages * page_bytes >> 20,
      pages.device_alloc_ms(), host_pages * page_bytes >> 20, pages.host_pages_per_chunk(),
      pages.commit_ahead_chunks(), host_commit_wait_ms);
}

// One context's KV of host chunks is committed ahead of use, off the engine thread: a host-tier hit's
// demotions and a disk hit's reads need that much fresh host memory at once, and pinning it on first use
// cost more than the copies themselves.
VkPageStoreOptions GpuEngine::State::page_store_options(const GpuModel& model, const GpuEngineConfig& cfg) {
  VkPageStoreOptions o;
  const uint64_t pages = (uint64_t{cfg.n_ctx} + cfg.page_tokens - 1) / cfg.page_tokens;
  o.host_commit_ahead_bytes = pages * model.kv_layout().page_bytes();
  return o;
}

GpuEngine::GpuEngine(std::unique_ptr<vk::Context> context, const GgufFile& file, const Tokenizer& tokenizer,
                     GpuEngineConfig config)
    : GpuEngine(*context, file, tokenizer, std::move(config)) {
  owned_context_ = std::move(context);
}

GpuEngine::GpuEngine(vk::Context& context, const GgufFile& file, const Tokenizer& tokenizer,
                     GpuEngineConfig config)
    : context_(context) {
  const ModelConfig mc = ModelConfig::from_gguf(file);
  config.n_ctx = context_size(config.n_ctx, mc.n_ctx_train, 8192);
  config.parallel = std::max<uint32_t>(1, config.parallel);
  GpuModelOptions options;
  options.max_batch_tokens = std::max<uint32_t>(config.max_batch_tokens, config.parallel);
  options.max_sequences = config.parallel;
  options.max_context = config.n_ctx;
  options.page_tokens = config.page_tokens;
  options.deterministic = config.deterministic;

  // Size the tiers in pages. Attention binds the device tier through at most kMaxPageChunks storage-buffer
  // bindings (VkPageStore cuts it into chunks of one binding's whole pages, the last one shorter).
  kernels::KvLayout layout{mc.n_layers, config.page_tokens, mc.n_kv_heads * mc.head_dim_k};
  const uint64_t page_bytes = layout.page_bytes();
  KvTierInputs tiers_in;
  tiers_in.page_bytes = page_bytes;
  tiers_in.page_tokens = config.page_tokens;
  tiers_in.n_ctx = config.n_ctx;
  tiers_in.parallel = config.parallel;
  tiers_in.kv_device_bytes = config.kv_device_bytes;
  tiers_in.kv_host_bytes = config.kv_host_bytes;
  tiers_in.device_local_free = context.device().info().device_local_free;
  tiers_in.pages_per_binding = layout.pages_per_binding(context.device().max_storage_buffer_range());
  tiers_in.max_bindings = GpuModel::kMaxPageChunks;
  const KvTierSizes tiers = size_kv_tiers(tiers_in);
  const uint32_t device_pages = tiers.device_pages, host_pages = tiers.host_pages;
  const uint64_t pages_per_seq = tiers.pages_per_sequence;
  if (!config.kv_device_bytes)
    spdlog::info(
        "kv: device tier by default: max(a quarter of free device memory, 2 contexts per slot = {} "
        "pages), at most {} bindings of {} pages",
        2 * uint64_t{config.parallel} * pages_per_seq, GpuModel::kMaxPageChunks, tiers_in.pages_per_binding);
  if (device_pages < tiers.wanted_device_pages)
    spdlog::warn("kv: device tier capped at {} pages ({} MiB): {} storage-buffer bindings", device_pages,
                 device_pages * page_bytes >> 20, GpuModel::kMaxPageChunks);
  if (device_pages <= pages_per_seq)
    spdlog::warn(
        "kv: device tier of {} pages holds less than one context of {} tokens: requests that may grow "
        "past {} tokens (max_tokens -1 included) are rejected",
        device_pages, config.n_ctx,
        (device_pages - std::min(device_pages, 1u)) * uint64_t{config.page_tokens});
  else if (device_pages < config.parallel * pages_per_seq)
    spdlog::warn(
        "kv: device tier holds {} pages; {} sequences of {} tokens need {}: requests may wait in the "
        "queue or be preempted (and resumed) for room",
        device_pages, config.parallel, config.n_ctx, config.parallel * pages_per_seq);

  // The disk tier's fingerprint reads the whole model file (about a second for 4.5 GB): it runs beside the
  // State's construction, so that the weights upload meanwhile and the host tier's first chunks (which a
  // disk hit reads into) are committed before the first request instead of inside its TTFT.
  std::future<uint64_t> disk_fingerprint;
  if (!config.kv_disk_dir.empty() && config.kv_disk_bytes > 0) {
    // Pages are reused only by the same model bytes, KV layout, kernels (the embedded SPIR-V), device and
    // driver: anything else computes other floating-point values, and a cached answer under --deterministic
    // would no longer equal a cold one.
    const vk::PipelineCacheIdentity build = vk::pipeline_cache_identity(context.device());
    const std::string identity_rest = fmt::format(
        " layers={} page_tokens={} kv_dim={} page_bytes={} deterministic={} device={} kernels={:016x} "
        "driver={:08x}",
        layout.n_layers, layout.page_tokens, layout.kv_dim, page_bytes, config.deterministic,
        context.device().info().name, build.build_hash, build.driver_version);
    disk_fingerprint = std::async(std::launch::async, [path = file.path(), identity_rest] {
      const auto started = std::chrono::steady_clock::now();
      const std::string identity = fmt::format("{:016x}", model_file_fingerprint(path)) + identity_rest;
      const uint64_t fingerprint = XXH3_64bits(identity.data(), identity.size());
      spdlog::info(
          "kv disk tier: model fingerprint {:016x} in {:.0f} ms", fingerprint,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
      return fingerprint;
    });
  }
  state_ = std::make_unique<State>(context, file, mc, tokenizer, config, options, device_pages, host_pages,
                                   std::move(disk_fingerprint));
  EngineInfo& info = state_->info;
  info.name = "vulkan";
  info.device = context.device().info().name;
  info.n_vocab = mc.n_vocab;
  info.n_ctx = config.n_ctx;
  info.parallel = config.parallel;
  info.queue_capacity = config.queue_capacity;
  spdlog::info("engine: vulkan on {} n_ctx={} parallel={} batch={} deterministic={}", info.device, info.n_ctx,
               info.parallel, options.max_batch_tokens, config.deterministic);
  spdlog::info("kv: page {} tokens = {} KiB; device tier {} pages ({} MiB), host tier {} pages ({} MiB)",
               config.page_tokens, page_bytes >> 10, device_pages, device_pages * page_bytes >> 20,
               host_pages, host_pages * page_bytes >> 20);
  state_->publish_stats();
  state_->worker = std::thread([s = state_.get()] { s->run(); });
}

GpuEngine::~GpuEngine() {
  shutdown(std::chrono::milliseconds(0));
}

const EngineInfo& GpuEngine::info() const {
  return state_->info;
}

std::variant<GenerationStream, SubmitRejection> GpuEngine::submit(GenerateRequest request) {
  return state_->queue.submit(std::move(request));
}

bool GpuEngine::has_free_slot() const {
  return state_->queue.has_free_slot();
}

EngineCounters GpuEngine::counters() const {
  return state_->queue.counters();
}

FlushResult GpuEngine::flush_cache() {
  auto done = std::make_shared<std::promise<FlushResult>>();
  auto future = done->get_future();
  state_->queue.post([s = state_.get(), done] {
    const uint32_t freed = s->cache.flush();
    s->publish_stats();
    done->set_value(FlushResult{freed, s->cache.stats().device_pages_pinned});
  });
  return future.get();
}

CachePageHashes GpuEngine::cache_page_hashes() {
  auto done = std::make_shared<std::promise<CachePageHashes>>();
  auto future = done->get_future();
  state_->queue.post([s = state_.get(), done] {
    PageHashListing listing = s->cache.page_hashes();
    done->set_value(CachePageHashes{std::move(listing.device), std::move(listing.host)});
  });
  return future.get();
}

void GpuEngine::shutdown(std::chrono::milliseconds grace) {
  state_->queue.shutdown(grace);
  if (state_->worker.joinable() && state_->worker.get_id() != std::this_thread::get_id())
    state_->worker.join();
}

}  // namespace kvtrie::engine
