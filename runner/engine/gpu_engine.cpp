#include "runner/engine/gpu_engine.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "cache/kv_cache.h"
#include "cache/vk_page_store.h"
#include "kernels/error.h"
#include "runner/engine/admission.h"
#include "runner/engine/generation.h"
#include "runner/engine/gpu_model.h"
#include "runner/engine/kv_tier_sizing.h"
#include "runner/engine/request_queue.h"
#include "runner/model/model_fingerprint.h"
#include "runner/sampler.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::engine {

namespace {

// One running request: its cache sequence, its tokens and its output state. A preempted request keeps all of
// it but the cache sequence (in a Preempted, on its QueuedRequest) until it resumes.
struct Running {
  std::unique_ptr<QueuedRequest> queued;
  NamespaceId ns = 0;
  GroupId group = 0;  // the tenant whose device-tier share the sequence's pages count against
  SeqId seq{};
  std::vector<int32_t> tokens;  // prompt, then every sampled token
  uint32_t prompt_size = 0;
  uint32_t max_tokens_total = 0;  // the longest this sequence may grow (prompt + max_tokens, within n_ctx)
  uint32_t computed = 0;          // tokens whose KV is written and committed
  uint32_t step_tokens = 0;       // tokens reserved for this step's batch (0: not in it)
  AcquireResult hit;              // of its first start: what the client is told was cached
  std::unique_ptr<Generation> generation;
  std::unique_ptr<Sampler> sampler;
  Clock::time_point prompt_started{}, first_token{};
  double prompt_ms = 0;
  bool has_first_token = false;
  bool prefilling() const { return computed < prompt_size; }
  // Tokens whose KV is still to be written: the uncomputed prompt (or, after a resume, the uncached part of
  // prompt + generated tokens); 1 while decoding.
  uint32_t pending() const { return static_cast<uint32_t>(tokens.size()) - computed; }
};

struct Preempted final : ResumeState {
  explicit Preempted(std::unique_ptr<Running> j) : job(std::move(j)) {}
  std::unique_ptr<Running> job;  // job->queued is empty: the QueuedRequest holding this owns it
};

// The trie's namespace of a request: the client's namespace hashed with its tenant's salt as the seed. Salt 0
// (no tenant) gives the hash every namespace had before tenants existed.
NamespaceId namespace_of(const GenerateRequest& request) {
  return XXH64(request.cache_namespace.data(), request.cache_namespace.size(), request.tenant_salt);
}

uint32_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<uint32_t>(i);
}

}  // namespace

struct GpuEngine::State {
  const Tokenizer& tokenizer;
  GpuEngineConfig config;
  EngineInfo info;
  GpuModel model;
  VkPageStore pages;
  std::unique_ptr<DiskPageStore> disk;  // before the cache, which borrows it
  KvCache cache;
  RequestQueue queue;
  std::vector<std::unique_ptr<Running>> running;  // engine thread only
  Batch batch;                                    // reused every step: no allocation in steady state
  std::vector<float> logits;
  struct Scheduled {
    Running* job;
    uint32_t tokens;  // consecutive batch tokens of this job
    bool sampled;     // its last batch token has a logits row
  };
  std::vector<Scheduled> scheduled;  // this step's jobs, in batch order
  mutable std::mutex stats_mutex;  // the snapshots below: written by the engine thread, read by HTTP threads
  KvCacheStats stats_snapshot;
  double copy_seconds_snapshot = 0;
  std::thread worker;

  State(vk::Context& context, const GgufFile& file, const ModelConfig& mc, const Tokenizer& tok,
        const GpuEngineConfig& cfg, const GpuModelOptions& options, uint32_t device_pages,
        uint32_t host_pages, uint64_t disk_fingerprint)
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
      dc.fingerprint = disk_fingerprint;
      dc.page_tokens = cfg.page_tokens;
      dc.page_bytes = model.kv_layout().page_bytes();
      disk = std::make_unique<DiskPageStore>(dc);
      if (host_pages == 0) spdlog::warn("kv disk tier unused: it needs a host tier (--kv-host-mb)");
      cache.attach_disk_tier(*disk, pages);
    }
  }

  // One context's KV of host chunks is committed ahead of use, off the engine thread: a host-tier hit's
  // demotions and a disk hit's reads need that much fresh host memory at once, and pinning it on first use
  // cost more than the copies themselves.
  static VkPageStoreOptions page_store_options(const GpuModel& model, const GpuEngineConfig& cfg) {
    VkPageStoreOptions o;
    const uint64_t pages = (uint64_t{cfg.n_ctx} + cfg.page_tokens - 1) / cfg.page_tokens;
    o.host_commit_ahead_bytes = pages * model.kv_layout().page_bytes();
    return o;
  }

  // Engine thread, when it stops: what the device and host tiers cache goes to disk for the next start.
  void persist_to_disk() {
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

  void run();
  void admit(RequestQueue::Taken& taken);
  bool fits_now(const QueuedRequest& queued, const std::vector<int32_t>& tokens, NamespaceId ns) const;
  void start(std::unique_ptr<QueuedRequest> queued);
  void end_queued(std::unique_ptr<QueuedRequest> queued, StopKind reason);
  void reserve_step();
  void preempt(size_t index);
  bool build_batch();
  void after_forward();
  void finish(Running& job, StopKind reason);
  void drop(size_t index);
  void publish_stats() {
    std::lock_guard lock(stats_mutex);
    stats_snapshot = cache.stats();
    copy_seconds_snapshot = pages.copy_seconds();
  }
};

GpuEngine::GpuEngine(vk::Context& context, const GgufFile& file, const Tokenizer& tokenizer,
                     GpuEngineConfig config) {
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

  uint64_t disk_fingerprint = 0;
  if (!config.kv_disk_dir.empty() && config.kv_disk_bytes > 0) {
    // Pages are reused only by the same model bytes, KV layout, kernels and device: anything else computes
    // other floating-point values.
    const auto started = std::chrono::steady_clock::now();
    const std::string identity =
        fmt::format("{:016x} layers={} page_tokens={} kv_dim={} page_bytes={} deterministic={} device={}",
                    model_file_fingerprint(file.path()), layout.n_layers, layout.page_tokens, layout.kv_dim,
                    page_bytes, config.deterministic, context.device().info().name);
    disk_fingerprint = XXH3_64bits(identity.data(), identity.size());
    spdlog::info(
        "kv disk tier: model fingerprint {:016x} in {:.0f} ms", disk_fingerprint,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  }
  state_ = std::make_unique<State>(context, file, mc, tokenizer, config, options, device_pages, host_pages,
                                   disk_fingerprint);
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

void GpuEngine::State::run() {
  for (;;) {
    RequestQueue::Taken taken = queue.take(config.parallel - running.size(), running.empty());
    for (auto& task : taken.tasks) task();
    admit(taken);
    for (size_t i = running.size(); i-- > 0;)
      if (taken.cancel_all || running[i]->queued->channel->cancelled()) {
        finish(*running[i], StopKind::Cancelled);
        drop(i);
      }
    queue.set_active(static_cast<uint32_t>(running.size()));
    if (taken.stop && running.empty()) {
      persist_to_disk();
      return;
    }
    if (running.empty()) continue;
    try {
      if (!build_batch()) {
        // Every running sequence waits for its promotion or copy-on-write copies: nothing else to overlap.
        cache.sync();
        continue;
      }
      model.forward(batch, logits);
      after_forward();
      // Copies that completed during the step are retired now, before the next admissions queue more: the
      // cache retires only when every queued copy is done (then promotions free their host pages).
      cache.poll();
    } catch (const std::exception& e) {
      // A failure inside one step must not take the daemon down: end every request of the step cleanly.
      spdlog::error("engine: step failed, cancelling {} requests: {}", running.size(), e.what());
      for (size_t i = running.size(); i-- > 0;) {
        finish(*running[i], StopKind::Cancelled);
        drop(i);
      }
    }
    publish_stats();
    queue.set_active(static_cast<uint32_t>(running.size()));
  }
}

void GpuEngine::State::admit(RequestQueue::Taken& taken) {
  std::vector<std::unique_ptr<QueuedRequest>> waiting;  // back to the queue's front, in this order
  bool blocked = false;  // the first request that did not fit holds back everything behind it (FIFO)
  for (auto& queued : taken.requests) {
    if (taken.cancel_all || queued->channel->cancelled()) {
      end_queued(std::move(queued), StopKind::Cancelled);  // it holds no pages: nothing to wait for
      continue;
    }
    if (blocked) {
      waiting.push_back(std::move(queued));
      continue;
    }
    const auto* resumed = static_cast<const Preempted*>(queued->resume.get());
    const std::vector<int32_t>& tokens = resumed ? resumed->job->tokens : queued->request.prompt;
    const NamespaceId ns = namespace_of(queued->request);
    // Same new prefix as a request still prefilling: wait for it to be cached rather than compute it twice.
    const uint32_t cached = cache.peek(ns, tokens).matched_tokens;
    const bool share = std::any_of(running.begin(), running.end(), [&](const auto& other) {
      return other->ns == ns && other->prefilling() &&
             common_prefix(other->tokens, tokens) >= cached + config.page_tokens;
    });
    if (share) {
      waiting.push_back(std::move(queued));
    } else if (!fits_now(*queued, tokens, ns)) {
      blocked = true;
      waiting.push_back(std::move(queued));
    } else {
      start(std::move(queued));
    }
  }
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) queue.put_back(std::move(*it));
}

bool GpuEngine::State::fits_now(const QueuedRequest& queued, const std::vector<int32_t>& tokens,
                                NamespaceId ns) const {
  const uint32_t P = config.page_tokens;
  uint64_t outstanding = 0;
  for (const auto& job : running)
    outstanding += outstanding_pages(static_cast<uint32_t>(job->tokens.size()), job->max_tokens_total,
                                     static_cast<uint32_t>(cache.page_table(job->seq).size()), P);
  const KvCache::ReusePreview reuse = cache.preview_acquire(ns, tokens);
  AdmissionInput in;
  in.tokens = static_cast<uint32_t>(tokens.size());
  in.max_tokens_total =
      max_sequence_tokens(queued.request.prompt.size(), queued.request.max_tokens, info.n_ctx);
  in.device_reused_tokens = reuse.device_tokens;
  in.host_reused_tokens = reuse.host_tokens;
  in.unpinned_device_pages = reuse.unpinned_device_pages;
  return may_start(admission_cost(in, P), cache.reclaimable_device_pages(), outstanding, running.empty());
}

void GpuEngine::State::start(std::unique_ptr<QueuedRequest> queued) {
  std::unique_ptr<Running> job;
  const bool resumed = queued->resume != nullptr;
  if (resumed) {
    // Everything it produced so far is kept: its generated tokens are matched against the trie like a prompt,
    // its sampler continues its random sequence, and its Generation does not emit them again.
    job = std::move(static_cast<Preempted&>(*queued->resume).job);
    queued->resume.reset();
  } else {
    job = std::make_unique<Running>();
    job->ns = namespace_of(queued->request);
    job->group = queued->request.tenant_salt;
    job->tokens = queued->request.prompt;
    job->prompt_size = static_cast<uint32_t>(job->tokens.size());
    job->max_tokens_total = max_sequence_tokens(job->prompt_size, queued->request.max_tokens, info.n_ctx);
    job->generation = std::make_unique<Generation>(tokenizer, queued->request, info.n_ctx);
    job->sampler = std::make_unique<Sampler>(queued->request.sampling);
  }
  job->queued = std::move(queued);
  const AcquireResult hit = cache.acquire(job->ns, job->tokens, job->group);
  job->seq = hit.seq;
  job->computed = hit.cached_tokens;
  if (!resumed) job->hit = hit;
  // Running stays in arrival order, so the newest request is the one preempted first.
  const auto at =
      std::upper_bound(running.begin(), running.end(), job->queued->submitted,
                       [](Clock::time_point t, const auto& other) { return t < other->queued->submitted; });
  running.insert(at, std::move(job));
}

void GpuEngine::State::end_queued(std::unique_ptr<QueuedRequest> queued, StopKind reason) {
  if (queued->resume) {
    std::unique_ptr<Running> job = std::move(static_cast<Preempted&>(*queued->resume).job);
    queued->resume.reset();
    job->queued = std::move(queued);
    finish(*job, reason);  // its cache sequence was released when it was preempted
    return;
  }
  Chunk last = final_chunk(nullptr, *queued, GenerationStats{}, reason);
  queue.report_finished(*last.final, 0);
  queued->channel->finish(std::move(last));
}

void GpuEngine::State::reserve_step() {
  // Oldest first: each sequence reserves the pages of this step's tokens; when the device tier has no page
  // left, the newest running sequence is preempted (the current one last of all).
  uint32_t decodes = 0;
  for (const auto& job : running) decodes += job->pending() == 1;
  const uint32_t max_batch = model.options().max_batch_tokens;
  uint32_t prefill_budget = max_batch - std::min(decodes, max_batch);
  for (size_t i = 0; i < running.size(); ++i) {
    Running& job = *running[i];
    job.step_tokens = 0;
    // Its pages are still arriving on the transfer queue: the others run meanwhile.
    if (!cache.ready(job.seq)) continue;
    const uint32_t n = job.pending() == 1 ? 1 : std::min(job.pending(), prefill_budget);
    if (n == 0) continue;
    for (;;) {
      if (cache.reserve(job.seq, job.computed + n) == ReserveStatus::Ok) {
        job.step_tokens = n;
        if (job.pending() > 1) prefill_budget -= n;
        break;
      }
      if (running.size() == 1) {
        // Cannot happen for a request that passed never_fits (it then owns the whole tier): keep the daemon
        // up.
        spdlog::error("engine: a lone request finds no KV device page for {} tokens; cancelling it",
                      job.computed + n);
        finish(job, StopKind::Cancelled);
        drop(i);
        return;
      }
      const size_t victim = running.size() - 1;
      preempt(victim);
      if (victim == i) break;  // it was the newest: it gave its own room back
    }
  }
}

void GpuEngine::State::preempt(size_t index) {
  std::unique_ptr<Running> job = std::move(running[index]);
  running.erase(running.begin() + static_cast<std::ptrdiff_t>(index));
  // Its committed tokens stay in the trie, unpinned, as for a cancelled request: resuming reuses them unless
  // they are evicted meanwhile (then they are recomputed).
  cache.release(job->seq);
  job->step_tokens = 0;
  spdlog::info("engine: KV device tier full: preempting the newest request ({} tokens) until there is room",
               job->tokens.size());
  queue.report_preempted();
  std::unique_ptr<QueuedRequest> queued = std::move(job->queued);
  queued->resume = std::make_unique<Preempted>(std::move(job));
  queue.put_back(std::move(queued));
}

bool GpuEngine::State::build_batch() {
  batch.clear();
  scheduled.clear();
  reserve_step();
  // Decodes first (one token each, latency-critical), then prefill chunks in arrival order.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& job_ptr : running) {
      Running& job = *job_ptr;
      const uint32_t n = job.step_tokens;
      if (n == 0 || (job.pending() > 1) != (pass == 1)) continue;
      if (job.prefilling() && job.prompt_started == Clock::time_point{}) job.prompt_started = Clock::now();
      const uint32_t seq_index = batch.add_sequence(cache.page_table(job.seq));
      for (uint32_t i = 0; i < n; ++i) {
        batch.tokens.push_back(job.tokens[job.computed + i]);
        batch.positions.push_back(job.computed + i);
        batch.seq.push_back(seq_index);
      }
      // The last known token (the last prompt token, or a decode) has logits to sample from.
      const bool sample = job.computed + n == job.tokens.size();
      if (sample) batch.logits_for.push_back(static_cast<uint32_t>(batch.tokens.size() - 1));
      scheduled.push_back({&job, n, sample});
    }
  }
  return !batch.tokens.empty();
}

void GpuEngine::State::after_forward() {
  const uint32_t n_vocab = info.n_vocab;
  size_t row = 0;
  for (const Scheduled& s : scheduled) {
    Running& job = *s.job;
    cache.commit(job.seq, std::span<const int32_t>(job.tokens).subspan(job.computed, s.tokens));
    job.computed += s.tokens;
    if (!s.sampled) continue;
    if (job.prompt_ms == 0) job.prompt_ms = ms_between(job.prompt_started, Clock::now());
    const std::span<const float> logits_row(logits.data() + row++ * n_vocab, n_vocab);
    const int32_t token = job.sampler->sample(logits_row, job.tokens);
    if (!job.has_first_token) {
      job.has_first_token = true;
      job.first_token = Clock::now();
    }
    std::optional<TokenLogprob> lp;
    if (job.queued->request.logprobs > 0)
      lp = make_token_logprob(logits_row, token, job.queued->request.logprobs);
    Chunk chunk = job.generation->accept(token, std::move(lp));
    if (!chunk.tokens.empty() || !chunk.text.empty()) job.queued->channel->push(std::move(chunk));
    job.tokens.push_back(token);
  }
  for (size_t i = running.size(); i-- > 0;)
    if (running[i]->generation->done()) {
      finish(*running[i], *running[i]->generation->stop_kind());
      drop(i);
    }
#if !defined(NDEBUG) || defined(KVTRIE_SANITIZE_BUILD)
  cache.check_invariants();  // the whole audit after every step where speed is not the point
#endif
}

void GpuEngine::State::finish(Running& job, StopKind reason) {
  GenerationStats timings;
  timings.prompt_ms = job.prompt_ms;
  timings.cached_tokens = job.hit.cached_tokens;
  timings.cached_tokens_device = job.hit.device_hit_tokens;
  timings.cached_tokens_host = job.hit.host_hit_tokens;
  timings.cached_tokens_disk = job.hit.disk_hit_tokens;
  if (job.has_first_token) {
    timings.ttft_ms = ms_between(job.queued->submitted, job.first_token);
    timings.decode_ms = ms_between(job.first_token, Clock::now());
  }
  Chunk last = final_chunk(job.generation.get(), *job.queued, timings, reason);
  queue.report_finished(*last.final, job.prompt_size - job.hit.cached_tokens);
  job.queued->channel->finish(std::move(last));
}

void GpuEngine::State::drop(size_t index) {
  cache.release(running[index]->seq);
  running.erase(running.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace kvtrie::engine
