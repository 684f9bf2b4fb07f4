// The GpuEngine's stats: the engine thread publishes snapshots of the cache's stats after every step, and
// HTTP threads read them (cache_stats, memory_use) without waiting for the engine thread.
#include <spdlog/spdlog.h>

#include <chrono>

#include "runner/engine/gpu_engine_state.h"

namespace kvtrie::engine {

// Engine thread, when it stops: what the device and host tiers cache goes to disk for the next start.
void GpuEngine::State::persist_to_disk() {
  if (!disk || !disk->enabled()) return;
  try {
    const auto started = std::chrono::steady_clock::now();
    const uint32_t n = cache.persist_to_disk();
    spdlog::info(
        "kv disk tier: {} pages persisted at shutdown in {:.0f} ms", n,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  } catch (const std::exception& e) {
    spdlog::error("kv disk tier: persisting at shutdown failed: {}", e.what());
  }
  publish_stats();
}

void GpuEngine::State::publish_stats() {
  std::lock_guard lock(stats_mutex);
  stats_snapshot = cache.stats();
  copy_seconds_snapshot = pages.copy_seconds();
}

GpuEngine::MemoryUse GpuEngine::memory_use() const {
  const auto& layout = state_->model.kv_layout();
  uint64_t device = 0, host = 0;
  for (const PageChunk& c : state_->pages.device_chunks())
    device += uint64_t{c.page_count} * layout.page_bytes();
  for (const PageChunk& c : state_->pages.host_chunks()) host += uint64_t{c.page_count} * layout.page_bytes();
  return {state_->model.weight_bytes(), device, host, state_->model.compute_bytes()};
}

CacheStats GpuEngine::cache_stats() const {
  KvCacheStats s;
  double copy_seconds = 0;
  {
    std::lock_guard lock(state_->stats_mutex);
    s = state_->stats_snapshot;
    copy_seconds = state_->copy_seconds_snapshot;
  }
  CacheStats out;
  out.enabled = true;
  out.page_tokens = state_->config.page_tokens;
  out.trie_nodes = s.trie_nodes;
  out.trie_tokens = uint64_t{s.device_pages_cached + s.host_pages_cached} * state_->config.page_tokens;
  out.miss_tokens = s.miss_tokens;
  out.demotions = s.demoted_pages;
  out.promotions = s.promoted_pages;
  out.evictions = s.evicted_device_pages + s.evicted_host_pages;
  const uint64_t page_bytes = state_->model.kv_layout().page_bytes();
  out.copy_bytes_to_host = s.demoted_pages * page_bytes;
  out.copy_bytes_to_device = s.promoted_pages * page_bytes;
  out.copy_seconds = copy_seconds;
  out.device = {s.device_pages_capacity, s.device_pages_used, s.device_bytes_budget, s.device_bytes_used,
                s.hit_tokens_device};
  out.host = {s.host_pages_capacity, s.host_pages_used, s.host_bytes_budget, s.host_bytes_used,
              s.hit_tokens_host};
  if (const DiskPageStore* disk = state_->disk.get()) {  // its stats() is safe from any thread
    const DiskPageStoreStats d = disk->stats();
    out.disk = {d.enabled,    d.pages,  d.bytes,       d.budget_bytes, s.hit_tokens_disk, d.reads,
                d.read_bytes, d.writes, d.write_bytes, d.evictions,    d.refused,         d.dropped_writes};
  }
  return out;
}

}  // namespace kvtrie::engine
