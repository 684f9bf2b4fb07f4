// Contract: the interface between the HTTP layer and an inference engine (GpuEngine, the Vulkan prefix-cache
// scheduler; the CPU ReferenceEngine for tests). Every method of Engine is safe to call from any thread
// (HTTP worker threads submit concurrently); an engine owns one internal thread that owns the model and the
// KV state. submit() either rejects a request at once (a SubmitRejection: overloaded, invalid, shutting down)
// or returns a GenerationStream, the RAII pull handle of that request's output: the caller pulls chunks with
// a timeout; destroying the handle before the final chunk cancels the generation (the engine stops at its
// next step and frees the slot). Tokens and text are produced through the shared Generation piece
// (generation.h), so every engine detokenizes, matches stop strings and computes logprobs the same way. The
// tokenizer an engine is built with must outlive it; streams may outlive the engine (they then end with
// done_reason "cancelled").
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "runner/engine/generation_stream.h"
#include "runner/sampler.h"

namespace kvtrie::engine {

// One generation request, already tokenized. Validated by the caller against EngineInfo (ids < n_vocab,
// 0 < prompt size, prompt + max_tokens within the context); an engine re-checks and rejects with
// SubmitError::InvalidRequest rather than trusting it.
struct GenerateRequest {
  std::vector<int32_t> prompt;    // token ids, BOS included when wanted; never empty
  int32_t max_tokens = 128;       // completion tokens at most; -1: until the context is full
  SamplingParams sampling;        // temperature, top-k/p, min-p, penalties, seed (runner/sampler.h)
  std::vector<std::string> stop;  // stop strings: generation ends before the first match (not emitted)
  uint32_t logprobs = 0;          // 0: none; N in 1..20: each token's logprob and the top N alternatives
  bool ignore_eos = false;        // keep generating past end-of-generation tokens (benchmarks)
  std::string cache_namespace;    // prefixes are shared only between requests of the same namespace
  // The tenant's server-side salt (0: no tenant): requests share prefixes only when both the salt and the
  // namespace are equal. Set by the server from the caller's API key, never from the request body.
  uint64_t tenant_salt = 0;
};

enum class SubmitError {
  Overloaded,      // every slot busy and the queue full: answer 503 with Retry-After
  InvalidRequest,  // the request breaks a limit (context, vocab, logprobs): answer 400
  ShuttingDown,    // the engine stopped accepting work: answer 503
};

struct SubmitRejection {
  SubmitError error = SubmitError::Overloaded;
  std::string message;
  std::chrono::seconds retry_after{1};  // meaningful for Overloaded
};

// What the HTTP layer needs to know about the loaded model and the engine, fixed after construction.
struct EngineInfo {
  std::string name;    // "reference-cpu", "vulkan"
  std::string device;  // human-readable device name ("CPU reference" for the reference engine)
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;           // tokens per sequence (prompt + completion)
  uint32_t parallel = 1;        // sequences decoded together (slots)
  uint32_t queue_capacity = 0;  // requests that may wait for a slot before submit() answers Overloaded
};

// Counters since start, for /metrics. Every field is monotonic except the gauges marked so.
struct EngineCounters {
  uint64_t requests_submitted = 0;
  uint64_t requests_rejected = 0;  // Overloaded + ShuttingDown + InvalidRequest
  uint64_t requests_completed = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_preempted = 0;  // times a running request gave its KV room back and was queued to resume
  uint64_t prompt_tokens = 0;       // prompt tokens of finished requests (cached or computed)
  uint64_t prompt_tokens_computed = 0;
  uint64_t completion_tokens = 0;
  uint64_t completion_tokens_gpu_greedy =
      0;  // of those, picked by the GPU's argmax (GpuEngineConfig::gpu_greedy)
  uint64_t completion_tokens_gpu_top_candidates =
      0;  // of those, drawn from the GPU's top candidates (GpuEngineConfig::gpu_top_candidates)
  uint64_t steps_ahead =
      0;                // decode steps submitted while the step before ran (GpuEngineConfig::greedy_ahead)
  uint32_t active = 0;  // gauge: requests holding a slot
  uint32_t queued = 0;  // gauge: requests waiting for a slot
};

// One KV tier (device-local or host-visible memory) as /cache and /metrics report it.
struct CacheTierStats {
  uint64_t pages_total = 0;
  uint64_t pages_used = 0;
  uint64_t bytes_budget = 0;
  uint64_t bytes_used = 0;
  uint64_t hit_tokens = 0;  // prompt tokens served from this tier
};

// The disk tier (--kv-disk-dir): files of pages the host tier dropped, kept across restarts.
struct DiskTierStats {
  bool enabled = false;  // configured and not turned off by a write failure
  uint64_t pages = 0;    // pages of this model on disk
  uint64_t bytes_used = 0;
  uint64_t bytes_budget = 0;
  uint64_t hit_tokens = 0;  // prompt tokens served from disk pages
  uint64_t reads = 0, read_bytes = 0, writes = 0, write_bytes = 0;
  uint64_t evictions = 0;       // files removed for the budget
  uint64_t refused = 0;         // truncated, corrupt or foreign files removed
  uint64_t dropped_writes = 0;  // pages not written (queue full, tier off)
};

// The prefix cache as a whole. An engine without a prefix cache reports enabled=false and zeros.
struct CacheStats {
  bool enabled = false;
  uint32_t page_tokens = 0;  // tokens per page
  uint64_t trie_nodes = 0;
  uint64_t trie_tokens = 0;  // tokens held by the trie
  uint64_t miss_tokens = 0;  // prompt tokens that had to be computed
  uint64_t demotions = 0;    // pages moved device -> host
  uint64_t promotions = 0;   // pages moved host -> device
  uint64_t evictions = 0;    // pages dropped
  uint64_t copy_bytes_to_host = 0;
  uint64_t copy_bytes_to_device = 0;
  double copy_seconds = 0;  // submit to seen-complete, summed: bytes / seconds bounds the bandwidth below
  CacheTierStats device;
  CacheTierStats host;
  DiskTierStats disk;
};

// The hash of every full page the prefix cache holds, by tier (cache/page_hash.h): what a router rebuilds
// from the KV events.
struct CachePageHashes {
  std::vector<uint64_t> device;
  std::vector<uint64_t> host;
};

struct FlushResult {
  uint64_t pages_freed = 0;
  uint64_t pages_pinned = 0;  // pages kept because running sequences use them
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const EngineInfo& info() const = 0;

  // Queues a request. Returns the stream handle, or a rejection when no slot or queue space is left, the
  // request is invalid, or the engine is shutting down. Never blocks on generation.
  virtual std::variant<GenerationStream, SubmitRejection> submit(GenerateRequest request) = 0;

  // True when a new request would get a slot at once (for llama-server's "no slot available").
  virtual bool has_free_slot() const = 0;

  virtual EngineCounters counters() const = 0;
  virtual CacheStats cache_stats() const = 0;
  // Drops every unpinned cached prefix (runs on the engine thread; blocks until done).
  virtual FlushResult flush_cache() = 0;
  // The cached pages' hashes (runs on the engine thread; blocks until done). An engine without a prefix
  // cache holds none.
  virtual CachePageHashes cache_page_hashes() { return {}; }

  // Stops accepting work (submit answers ShuttingDown), lets in-flight requests finish until `grace` has
  // passed, then cancels the rest; returns when the engine thread is idle. Idempotent.
  virtual void shutdown(std::chrono::milliseconds grace) = 0;
};

const char* submit_error_name(SubmitError error);

}  // namespace kvtrie::engine
