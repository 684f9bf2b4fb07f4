// Contract (private to the GpuEngine's files): the engine's state, one object owned by GpuEngine. The
// engine thread (run()) owns the model, the cache and every request it took from the queue: each one is a
// Job, in `running` or in `waiting` until it ends (end()). Other threads touch only the queue, the stats
// snapshots (under stats_mutex) and the disk tier's stats. Split by job: construction and KV tier sizing in
// gpu_engine.cpp, stats in gpu_engine_stats.cpp, scheduling in gpu_engine_scheduler.cpp.
#pragma once
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "cache/disk_page_store.h"
#include "cache/kv_cache.h"
#include "cache/parallel_for.h"
#include "cache/vk_page_store.h"
#include "runner/engine/gpu_engine.h"
#include "runner/engine/gpu_model.h"
#include "runner/engine/request.h"
#include "runner/engine/request_queue.h"

namespace kvtrie::engine {

// One request on the engine thread, from take to end: the Request and its place in the cache. A preempted
// job keeps everything (tokens, output state) but its cache sequence while it waits to resume.
struct Job {
  std::unique_ptr<Request> request;
  NamespaceId ns = 0;
  GroupId group = 0;            // the tenant whose device-tier share the sequence's pages count against
  SeqId seq{};                  // valid while running
  std::vector<int32_t> tokens;  // prompt, then every sampled token
  uint32_t prompt_size = 0;
  uint32_t max_tokens_total = 0;  // the longest this sequence may grow (prompt + max_tokens, within n_ctx)
  uint32_t computed = 0;          // tokens whose KV is written and committed
  uint32_t step_tokens = 0;       // tokens reserved for this step's batch (0: not in it)
  AcquireResult hit;              // of its first start: what the client is told was cached
  // The disk tier: its prompt's pages past the cached prefix are read in the background (the engine runs
  // other requests meanwhile), the last page first while it computes the first ones (kv_disk_overlap) or
  // before it starts (disk_read_whole: no overlap, or the pages are in the page cache, which reads a run
  // faster than a step computes a part of it). When its computing reaches the pages read, they hang after
  // it and it starts again on them (disk_run, for acquire(): parked at the front of `waiting` meanwhile).
  bool disk_checked = false;
  std::optional<DiskLoadId> disk_load;
  bool disk_read_whole = false;
  bool disk_hit = false;  // a read of its pages started: host commits are held until its prompt is computed
  DiskRun disk_run;
  uint32_t disk_overlap_steps = 0;  // steps computed while its read was in flight
  Clock::time_point prompt_started{};
  bool started() const { return request->generation != nullptr; }
  bool prefilling() const { return computed < prompt_size; }
  // Tokens whose KV is still to be written: the uncomputed prompt (or, after a resume, the uncached part of
  // prompt + generated tokens); 1 while decoding.
  uint32_t pending() const { return static_cast<uint32_t>(tokens.size()) - computed; }
};

// Prefill tokens of the first step of a prompt whose pages are read from disk meanwhile; each later step may
// take twice as many. The computing learns where it meets the read a step late, so steps should be short,
// but a short step costs nearly as much as a longer one: on the H100 machine a step of llama3-8b takes
// 27.6 ms for 64 tokens, 27 for 128 and 43 for 512 (docs/BENCHMARKS.md, session 25).
constexpr uint32_t kDiskOverlapFirstChunk = 512;

// Threads (the engine's own included) that sample a step's rows on the CPU.
constexpr uint32_t kSamplingThreads = 4;

struct GpuEngine::State {
  const Tokenizer& tokenizer;
  GpuEngineConfig config;
  EngineInfo info;
  GpuModel model;
  VkPageStore pages;
  std::unique_ptr<DiskPageStore> disk;  // before the cache, which borrows it
  KvCache cache;
  RequestQueue queue;
  // Engine thread only: every request it was handed and has not ended is in exactly one of these.
  std::vector<std::unique_ptr<Job>> running;  // in arrival order (the newest is preempted first)
  std::deque<std::unique_ptr<Job>> waiting;   // not admitted yet, or preempted; FIFO, preempted at the front
  Batch batch;                                // reused every step: no allocation in steady state
  std::span<const float> logits;              // the last step's, in the model's host memory
  struct Scheduled {
    Job* job;
    uint32_t tokens;  // consecutive batch tokens of this job
    bool sampled;     // its last batch token has a logits row
  };
  std::vector<Scheduled> scheduled;  // this step's jobs, in batch order
  // Steps ahead (gpu_engine_ahead.cpp): the jobs of the chain's steps, in row order (each decodes a token).
  std::vector<Job*> ahead;
  // The step's sampled rows that the CPU samples (their jobs, in row order) and their tokens: a step of
  // several such rows samples them on the pool's threads at once (each row 50-80 us on the GPU machine's
  // CPU while the GPU waits; docs/BENCHMARKS.md, session 24).
  std::vector<std::pair<Job*, size_t>> cpu_rows;
  std::vector<int32_t> cpu_tokens;
  ParallelFor row_pool{kSamplingThreads};
  mutable std::mutex stats_mutex;  // the snapshots below: written by the engine thread, read by HTTP threads
  KvCacheStats stats_snapshot;
  double copy_seconds_snapshot = 0;
  std::thread worker;

  // disk_fingerprint: the disk tier's (valid where it is configured), computed while the model uploads and
  // the host tier's first chunks commit.
  State(vk::Context& context, const GgufFile& file, const ModelConfig& mc, const Tokenizer& tok,
        const GpuEngineConfig& cfg, const GpuModelOptions& options, uint32_t device_pages,
        uint32_t host_pages, std::future<uint64_t> disk_fingerprint);

  // Construction (gpu_engine.cpp): the page store's options for this model and configuration, and the load's
  // info line once the KV tiers exist.
  static VkPageStoreOptions page_store_options(const GpuModel& model, const GpuEngineConfig& cfg);
  void log_load(vk::Context& context, double host_commit_wait_ms) const;

  // Stats (gpu_engine_stats.cpp). Engine thread: snapshots the cache's stats for cache_stats().
  void publish_stats();
  // Engine thread, when it stops: what the device and host tiers cache goes to disk for the next start.
  void persist_to_disk();

  // Scheduling (gpu_engine_scheduler.cpp), engine thread.
  void run();
  void admit(bool cancel_all);
  // Hands each prompt whose computing met its disk read the pages read (parking it to start again on them),
  // and the background disk reads that are done to their waiting requests.
  void finish_disk_loads();
  // Whether a disk hit is being read or its prompt computed: the host tier's commits ahead of use wait.
  bool disk_hit_prefilling() const;
  // The prefill tokens of this step (n at most) for a prompt whose pages are being read meanwhile.
  uint32_t disk_overlap_chunk(Job& job, uint32_t n);
  bool fits_now(const Job& job) const;
  void start(std::unique_ptr<Job> job);
  void reserve_step();
  void preempt(size_t index);
  bool build_batch();
  void after_forward();
  // Debug and sanitizer builds: the cache's whole invariant audit, after every step.
  void audit_cache();
  // Steps ahead (gpu_engine_ahead.cpp). Whether the built batch may start a chain of steps ahead: greedy
  // decodes of every running job, none waiting.
  bool may_go_ahead() const;
  // Runs the built batch and the steps fed from it, each submitted while the one before runs, until
  // something changes; returns with no step in flight.
  void run_ahead();
  // Whether the step after the one in flight may go now (nothing new, room for every job): reserves its
  // pages.
  bool chain_continues();
  // The next step of the chain's jobs, fed from the step in flight.
  void build_fed_batch();
  // A chain step's tokens: each job still running commits its step's token and takes the new one.
  void take_chain_tokens(std::span<const int32_t> tokens);
  void end(Job& job, StopKind reason);  // the one way a request ends (RequestQueue::end)
  void end_running(size_t index, StopKind reason);
  void update_gauges();
};

}  // namespace kvtrie::engine
