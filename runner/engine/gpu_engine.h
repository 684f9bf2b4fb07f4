// Contract: GpuEngine is the production Engine: the Vulkan forward pass (GpuModel) driven by a continuous-
// batching scheduler over the prefix-trie KV cache (cache/kv_cache.h). One engine thread owns the model, the
// cache and every running sequence; each step it admits queued requests (matching their prompts against the
// trie, so only uncached tokens are computed, at least one), packs prefill chunks and decode tokens of all
// running sequences into one batch, runs it, commits the new KV into the trie, and samples (while every
// running request decodes greedily and none waits, each step goes in while the one before runs:
// GpuEngineConfig::greedy_ahead). Requests that
// share a new prefix with one still prefilling wait for it, so that prefix is computed once. A cancelled
// request keeps the prefix it computed. Memory (runner/engine/admission.h): a request starts only when the
// device pages it needs fit beside what running sequences are promised, in strict FIFO order; one that could
// never fit the device tier is rejected at submit (InvalidRequest); when a running sequence finds no page the
// newest one is preempted: it keeps its computed prefix in the trie and its output state, goes back to the
// head of the queue and resumes from the cache (EngineCounters::requests_preempted counts it). Thread-safety
// as in engine.h (every public method, any thread). The GgufFile and Tokenizer must outlive the engine, and
// so must the Context unless the engine owns it (the daemon's engine, made by make_engine.h).
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>

#include "cache/kv_event_sink.h"
#include "kernels/vk/context.h"
#include "runner/engine/batch_tokens.h"
#include "runner/engine/engine.h"
#include "runner/model/gguf_file.h"

namespace kvtrie {
class Tokenizer;
}

namespace kvtrie::engine {

struct GpuEngineConfig {
  uint32_t n_ctx = 0;            // tokens per sequence; 0: the model's training context, capped at 8192
  uint32_t parallel = 4;         // sequences running together
  uint32_t queue_capacity = 64;  // requests waiting for a slot
  uint64_t kv_device_bytes =
      0;  // device tier; 0: a quarter of free device memory, at least 2 x parallel x n_ctx
          // tokens (capped at GpuModel::kMaxPageChunks storage-buffer bindings either way)
  uint64_t kv_host_bytes = 0;                       // host tier budget; 0: twice the device tier
  uint32_t page_tokens = 16;                        // tokens per KV page
  uint32_t max_batch_tokens = kDefaultBatchTokens;  // tokens of one forward pass (prefill chunk size)
  // ... and at most this many, decodes included, when it serves more than one sequence (a lone prompt takes
  // max_batch_tokens; step_prefill_budget, admission.h). On an H100, llama3-8b Q4_0, 8 clients of a
  // multi-turn chat over HTTP: 531-541 generated tok/s and a later-turn TTFT p50 of 64 ms with steps of 512
  // tokens, 514 and 94 ms with steps of 513, 518-531 and 199-206 ms with steps of 2048 (docs/BENCHMARKS.md,
  // session 15).
  uint32_t shared_step_tokens = 512;
  bool deterministic = false;  // batch-invariant kernels: cached and cold runs agree bit for bit
  // A step whose sampled rows are all greedy (no penalty, no logprobs) takes their tokens from the GPU's
  // argmax of the rows (Batch::greedy_only) instead of reading the logits back; false: always read back.
  bool gpu_greedy = true;
  // A step whose sampled rows all draw from their best entries alone (Request::top_entries_needed: top-k
  // sampling, no penalty that can raise a logit, no logprobs; greedy rows too) reads back each row's best
  // GpuModel::kTopCandidates logits, or kWideTopCandidates when a row needs more (top_k plus the penalty
  // window), instead of the row (Batch::top_candidates); false: the rows.
  bool gpu_top_candidates = true;
  // While every running request decodes greedily on the GPU (gpu_greedy) and none waits, each decode step
  // is submitted while the one before runs, its tokens that step's argmax read on the device
  // (GpuModel::submit): the device goes from step to step without waiting for the host to read the tokens
  // back, hand them out and submit again. false: every step waits for the one before.
  bool greedy_ahead = true;
  double tenant_kv_share = 1.0;  // a tenant's share of the device tier (KvCacheConfig::group_device_share)
  // Disk tier (--kv-disk-dir, --kv-disk-mb): host-tier drops go there and survive a restart; at shutdown
  // every cached page is persisted. Empty dir or 0 bytes: none. Needs a host tier (pages pass through it).
  std::filesystem::path kv_disk_dir;
  uint64_t kv_disk_bytes = 0;
  std::chrono::milliseconds kv_disk_read_delay{0};  // tests: every disk page read first waits this long
  uint32_t kv_disk_readers = 64;  // disk page reads in flight (DiskPageStoreConfig::reader_threads)
  // A prompt whose pages past the cached prefix are on disk starts computing them while they are read, the
  // last page first, until the two meet (a cold disk reads about as fast as the model computes); false: it
  // waits for the whole read.
  bool kv_disk_overlap = true;
  KvEventSink* kv_events =
      nullptr;  // told of every cached page change (--kv-events); must outlive the engine
};

class GpuEngine final : public Engine {
 public:
  // Uploads the model and allocates the KV tiers; throws InputError / kvtrie::Error when that fails.
  GpuEngine(vk::Context& context, const GgufFile& file, const Tokenizer& tokenizer, GpuEngineConfig config);
  // The same, owning the context (destroyed after everything of the engine that uses it).
  GpuEngine(std::unique_ptr<vk::Context> context, const GgufFile& file, const Tokenizer& tokenizer,
            GpuEngineConfig config);
  ~GpuEngine() override;

  const EngineInfo& info() const override;
  std::variant<GenerationStream, SubmitRejection> submit(GenerateRequest request) override;
  bool has_free_slot() const override;
  EngineCounters counters() const override;
  CacheStats cache_stats() const override;
  FlushResult flush_cache() override;
  CachePageHashes cache_page_hashes() override;
  void shutdown(std::chrono::milliseconds grace) override;

  // Bytes of device memory for weights, the KV device tier and activations (for load-time log lines).
  struct MemoryUse {
    uint64_t weights = 0, kv_device = 0, kv_host = 0, compute = 0;
  };
  MemoryUse memory_use() const;
  const vk::Context& context() const { return context_; }

 private:
  struct State;
  // Null unless the engine owns the context; declared before state_, so destroyed after it.
  std::unique_ptr<vk::Context> owned_context_;
  vk::Context& context_;
  std::unique_ptr<State> state_;
};

}  // namespace kvtrie::engine
