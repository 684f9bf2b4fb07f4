// The GpuEngine's scheduler: the engine thread's loop. Each step it takes new requests from the queue into
// its own waiting deque, admits what fits (FIFO), packs decodes and prefill chunks into one batch, runs it,
// commits the new KV and samples. Every request it took ends through end().
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "runner/engine/admission.h"
#include "runner/engine/gpu_engine_state.h"

namespace kvtrie::engine {

namespace {

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

std::unique_ptr<Job> make_job(std::unique_ptr<Request> request, uint32_t n_ctx) {
  auto job = std::make_unique<Job>();
  const GenerateRequest& params = request->params;
  job->ns = namespace_of(params);
  job->group = params.tenant_salt;
  job->tokens = params.prompt;
  job->prompt_size = static_cast<uint32_t>(job->tokens.size());
  job->max_tokens_total = max_sequence_tokens(job->prompt_size, params.max_tokens, n_ctx);
  job->request = std::move(request);
  return job;
}

}  // namespace

void GpuEngine::State::run() {
  for (;;) {
    // Up to one slot's worth of requests is considered each step: those already waiting first.
    const size_t free_slots = config.parallel - running.size();
    const size_t wanted = free_slots > waiting.size() ? free_slots - waiting.size() : 0;
    RequestQueue::Taken taken = queue.take(wanted, running.empty() && waiting.empty());
    for (auto& request : taken.requests) waiting.push_back(make_job(std::move(request), info.n_ctx));
    for (auto& task : taken.tasks) task();
    finish_disk_loads();
    admit(taken.cancel_all);
    if (disk) pages.hold_host_commits(disk_hit_prefilling());
    for (size_t i = running.size(); i-- > 0;)
      if (taken.cancel_all || running[i]->request->channel->cancelled()) end_running(i, StopKind::Cancelled);
    update_gauges();
    if (taken.stop && running.empty() && waiting.empty()) {
      persist_to_disk();
      return;
    }
    if (running.empty()) {
      // Nothing runs and every waiting request waits for its disk pages: sleep on the reads, not the CPU.
      if (!waiting.empty() && cache.disk_loads_in_flight() > 0)
        cache.wait_for_disk_load(std::chrono::milliseconds(5));
      continue;
    }
    try {
      if (!build_batch()) {
        // Every running sequence waits for its promotion or copy-on-write copies: nothing else to overlap.
        cache.sync();
        continue;
      }
      if (may_go_ahead()) {
        run_ahead();
      } else {
        logits = model.forward(batch);
        after_forward();
      }
      // Copies that completed during the step are retired now, before the next admissions queue more: the
      // cache retires only when every queued copy is done (then promotions free their host pages).
      cache.poll();
    } catch (const std::exception& e) {
      // A failure inside one step must not take the daemon down: end every request of the step cleanly.
      spdlog::error("engine: step failed, cancelling {} requests: {}", running.size(), e.what());
      // Steps submitted ahead are waited for before their sequences' pages go back.
      while (model.in_flight() > 0) {
        try {
          model.collect();
        } catch (const std::exception& again) {
          spdlog::error("engine: a step in flight failed too: {}", again.what());
        }
      }
      for (size_t i = running.size(); i-- > 0;) end_running(i, StopKind::Cancelled);
    }
    publish_stats();
    update_gauges();
  }
}

void GpuEngine::State::update_gauges() {
  queue.set_gauges(static_cast<uint32_t>(running.size()), static_cast<uint32_t>(waiting.size()));
}

void GpuEngine::State::admit(bool cancel_all) {
  // The first `free slots` waiting requests are considered, in order; the first one that does not fit holds
  // back everything behind it (FIFO). A request whose disk pages are being read takes no slot meanwhile.
  // Once cancel_all is set every waiting request ends.
  const size_t slots = cancel_all ? waiting.size() : config.parallel - running.size();
  size_t considered = 0;
  std::deque<std::unique_ptr<Job>> still_waiting;
  bool blocked = false;
  for (std::unique_ptr<Job>& job : waiting) {
    const bool in_window = considered < slots;
    if (in_window && (cancel_all || job->request->channel->cancelled())) {
      end(*job, StopKind::Cancelled);  // it holds no pages (a read in flight finishes without it)
      continue;
    }
    if (!in_window || blocked) {
      still_waiting.push_back(std::move(job));
      continue;
    }
    // Its prompt's pages on the disk tier are read in the background first; the requests behind it may
    // start meanwhile (it holds nothing the reads need from them).
    if (!job->disk_checked && !job->started()) {
      job->disk_checked = true;
      if (disk) pages.hold_host_commits(true);  // before the read takes host chunks (and wants the next)
      job->disk_load = cache.start_disk_load(job->ns, job->tokens, job->group, config.kv_disk_overlap);
      job->disk_hit = job->disk_load.has_value();
      job->disk_read_whole =
          job->disk_load && (!config.kv_disk_overlap || cache.disk_load_in_memory(*job->disk_load));
    }
    // Reading the whole run, or preempted during the overlap, it waits for the read to finish.
    if (job->disk_load && (job->disk_read_whole || job->started())) {
      still_waiting.push_back(std::move(job));
      continue;
    }
    ++considered;
    // Same new prefix as a request still prefilling: wait for it to be cached rather than compute it twice.
    const uint32_t cached = cache.peek(job->ns, job->tokens).matched_tokens;
    const bool share = std::any_of(running.begin(), running.end(), [&](const auto& other) {
      return other->ns == job->ns && other->prefilling() &&
             common_prefix(other->tokens, job->tokens) >= cached + config.page_tokens;
    });
    if (share) {
      still_waiting.push_back(std::move(job));
    } else if (!fits_now(*job)) {
      blocked = true;
      still_waiting.push_back(std::move(job));
    } else {
      start(std::move(job));
    }
  }
  waiting.swap(still_waiting);
}

bool GpuEngine::State::disk_hit_prefilling() const {
  // Pinning host chunks beside a disk hit's steps slowed them by a third (session 25), and the commits
  // that resumed when its read ended slowed the steps after the meet (session 26).
  const auto hit = [](const std::unique_ptr<Job>& job) { return job->disk_hit && job->prefilling(); };
  return cache.disk_loads_in_flight() > 0 || std::any_of(running.begin(), running.end(), hit) ||
         std::any_of(waiting.begin(), waiting.end(), hit);
}

void GpuEngine::State::finish_disk_loads() {
  if (cache.disk_loads_in_flight() == 0) return;
  // A prompt whose computing reached the pages its read has read so far takes them (the reads still in
  // flight are below, of no use now): they hang after what it computed, and it starts again on them. When
  // it computed them all it just goes on.
  for (size_t i = running.size(); i-- > 0;) {
    Job& job = *running[i];
    if (!job.disk_load || job.computed < cache.disk_load_floor(*job.disk_load)) continue;
    const DiskRun run = cache.hang_disk_load(*job.disk_load);
    job.disk_load.reset();
    spdlog::info(
        "kv disk tier: a prompt of {} tokens met its disk read at {} after {:.0f} ms: {} tokens read, {} "
        "computed",
        job.prompt_size, job.computed,
        job.prompt_started == Clock::time_point{} ? 0.0 : ms_between(job.prompt_started, Clock::now()),
        run.tokens, job.computed - job.hit.cached_tokens);
    if (run.tokens == 0) continue;
    std::unique_ptr<Job> parked = std::move(running[i]);
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    cache.release(parked->seq);  // its computed pages stay cached: the read's pages hang from them
    parked->step_tokens = 0;
    parked->disk_run = run;
    waiting.push_front(std::move(parked));
  }
  for (const DiskLoadDone& done : cache.poll_disk_loads()) {
    // A request cancelled meanwhile has ended: its pages stay cached for the next one.
    for (auto& job : waiting)
      if (job->disk_load == done.id) {
        job->disk_load.reset();
        job->disk_run = done.run;
      }
  }
}

bool GpuEngine::State::fits_now(const Job& job) const {
  const uint32_t P = config.page_tokens;
  uint64_t outstanding = 0;
  for (const auto& other : running)
    outstanding += outstanding_pages(static_cast<uint32_t>(other->tokens.size()), other->max_tokens_total,
                                     static_cast<uint32_t>(cache.page_table(other->seq).size()), P);
  const KvCache::ReusePreview reuse = cache.preview_acquire(job.ns, job.tokens);
  AdmissionInput in;
  in.tokens = static_cast<uint32_t>(job.tokens.size());
  in.max_tokens_total = job.max_tokens_total;
  in.device_reused_tokens = reuse.device_tokens;
  in.host_reused_tokens = reuse.host_tokens;
  in.unpinned_device_pages = reuse.unpinned_device_pages;
  return may_start(admission_cost(in, P), cache.reclaimable_device_pages(), outstanding, running.empty());
}

void GpuEngine::State::start(std::unique_ptr<Job> job) {
  // A resumed job keeps everything it produced so far: its generated tokens are matched against the trie
  // like a prompt, its sampler continues its random sequence, and its Generation does not emit them again.
  const bool resumed = job->started();
  if (!resumed) job->request->start_output(tokenizer, info.n_ctx);
  // A read of its pages still in flight hangs them later: no read of its own meanwhile.
  const AcquireResult hit =
      cache.acquire(job->ns, job->tokens, job->group, job->disk_run, /*read_disk=*/!job->disk_load);
  job->disk_run = {};
  job->seq = hit.seq;
  job->computed = hit.cached_tokens;
  if (!resumed) {
    job->hit = hit;
  } else {
    // Parked where its computing met its disk read: the pages that read hung are disk hits too.
    job->hit.cached_tokens += hit.disk_hit_tokens;
    job->hit.disk_hit_tokens += hit.disk_hit_tokens;
  }
  // Running stays in arrival order, so the newest request is the one preempted first.
  const auto at =
      std::upper_bound(running.begin(), running.end(), job->request->submitted,
                       [](Clock::time_point t, const auto& other) { return t < other->request->submitted; });
  running.insert(at, std::move(job));
}

void GpuEngine::State::reserve_step() {
  // Oldest first: each sequence reserves the pages of this step's tokens; when the device tier has no page
  // left, the newest running sequence is preempted (the current one last of all).
  uint32_t decodes = 0, prompts = 0;
  for (const auto& job : running) {
    decodes += job->pending() == 1;
    prompts += job->pending() > 1;
  }
  const uint32_t max_batch = model.options().max_batch_tokens;
  uint32_t prefill_budget = step_prefill_budget(max_batch, decodes, prompts, config.shared_step_tokens);
  for (size_t i = 0; i < running.size(); ++i) {
    Job& job = *running[i];
    job.step_tokens = 0;
    // Its pages are still arriving on the transfer queue: the others run meanwhile.
    if (!cache.ready(job.seq)) continue;
    uint32_t n = job.pending() == 1 ? 1 : std::min(job.pending(), prefill_budget);
    if (job.disk_load) n = disk_overlap_chunk(job, n);
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
        end_running(i, StopKind::Cancelled);
        return;
      }
      const size_t victim = running.size() - 1;
      preempt(victim);
      if (victim == i) break;  // it was the newest: it gave its own room back
    }
  }
}

uint32_t GpuEngine::State::disk_overlap_chunk(Job& job, uint32_t n) {
  // Its prompt's pages are being read from the last one down while it computes the first ones. It takes at
  // most half the pages between its position and those read (the read keeps the other half, so neither
  // side's speed needs knowing: if the read is slow the computing takes all of them within a few steps), in
  // steps that start short and double (where the two meet is seen a step late), and tells the read where
  // the computing will be (it reads nothing below).
  const uint32_t P = config.page_tokens;
  const uint32_t floor = cache.disk_load_floor(*job.disk_load);
  if (floor <= job.computed) return 0;  // met: it takes the pages read before the next step
  const uint32_t gap_pages = (floor - job.computed + P - 1) / P;
  const uint32_t half = std::max<uint32_t>(1, gap_pages / 2) * P;
  const uint32_t step = kDiskOverlapFirstChunk << std::min(job.disk_overlap_steps, 16u);
  n = std::min({n, floor - job.computed, half, step});
  ++job.disk_overlap_steps;
  cache.limit_disk_load(*job.disk_load, job.computed + n);
  spdlog::debug("engine: computing {} prompt tokens from {} while the disk read has reached {}", n,
                job.computed, floor);
  return n;
}

void GpuEngine::State::preempt(size_t index) {
  std::unique_ptr<Job> job = std::move(running[index]);
  running.erase(running.begin() + static_cast<std::ptrdiff_t>(index));
  // Its committed tokens stay in the trie, unpinned, as for a cancelled request: resuming reuses them unless
  // they are evicted meanwhile (then they are recomputed).
  cache.release(job->seq);
  job->step_tokens = 0;
  spdlog::info("engine: KV device tier full: preempting the newest request ({} tokens) until there is room",
               job->tokens.size());
  queue.report_preempted();
  waiting.push_front(std::move(job));  // older than every request waiting to start
}

bool GpuEngine::State::build_batch() {
  batch.clear();
  scheduled.clear();
  reserve_step();
  // Decodes first (one token each, latency-critical), then prefill chunks in arrival order.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& job_ptr : running) {
      Job& job = *job_ptr;
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
  // Greedy rows with nothing else read from them take their token from the GPU: no logits read back and
  // scanned here while the GPU waits (docs/BENCHMARKS.md, session 24). Rows that draw from their best
  // entries alone read back only the GPU's best kTopCandidates of the row, or kWideTopCandidates when one
  // needs more (sampling with penalties).
  const auto greedy = [](const Scheduled& s) {
    return !s.sampled || s.job->request->wants_only_the_largest_logit();
  };
  batch.greedy_only = config.gpu_greedy && std::all_of(scheduled.begin(), scheduled.end(), greedy);
  size_t top_needed = 0;  // the most entries a row needs; SIZE_MAX: a row needs the whole row
  for (const Scheduled& s : scheduled) {
    if (!s.sampled || (config.gpu_greedy && s.job->request->wants_only_the_largest_logit())) continue;
    const size_t needed = s.job->request->top_entries_needed(info.n_vocab, s.job->tokens.size());
    top_needed = std::max(top_needed, needed == 0 ? SIZE_MAX : needed);
  }
  const uint32_t top = top_needed <= GpuModel::kTopCandidates       ? GpuModel::kTopCandidates
                       : top_needed <= GpuModel::kWideTopCandidates ? GpuModel::kWideTopCandidates
                                                                    : 0;
  batch.top_candidates = config.gpu_top_candidates && !batch.greedy_only && top <= info.n_vocab ? top : 0;
  return !batch.tokens.empty();
}

void GpuEngine::State::after_forward() {
  const uint32_t n_vocab = info.n_vocab;
  size_t row = 0, top_rows = 0;
  cpu_rows.clear();
  const GpuModel::TopCandidates top =
      batch.top_candidates != 0 ? model.top_candidates() : GpuModel::TopCandidates{};
  for (const Scheduled& s : scheduled) {
    Job& job = *s.job;
    cache.commit(job.seq, std::span<const int32_t>(job.tokens).subspan(job.computed, s.tokens));
    job.computed += s.tokens;
    if (!s.sampled) continue;
    Request& request = *job.request;
    if (request.prompt_ms == 0) request.prompt_ms = ms_between(job.prompt_started, Clock::now());
    if (batch.greedy_only) {
      const int32_t token = model.greedy_tokens()[row++];
      request.emit_picked(token);
      job.tokens.push_back(token);
      continue;
    }
    if (batch.top_candidates != 0) {
      const uint32_t K = top.per_row;
      const std::span<const int32_t> ids = top.ids.subspan(row * K, K);
      const bool greedy_row = request.wants_only_the_largest_logit();
      const int32_t token =
          greedy_row ? ids[0] : request.sample_top(ids, top.logits.subspan(row * K, K), job.tokens);
      ++row;
      if (!greedy_row) ++top_rows;
      request.emit_picked(token);
      job.tokens.push_back(token);
      continue;
    }
    cpu_rows.emplace_back(&job, row++);
  }
  // The rows' samplers are independent: several rows go to the pool's threads at once, then each token is
  // emitted here in row order.
  const auto logits_row = [&](size_t r) { return logits.subspan(r * n_vocab, n_vocab); };
  cpu_tokens.resize(cpu_rows.size());
  std::exception_ptr failed;  // a pool's item must not throw: a failure is rethrown here
  std::mutex failed_mutex;
  const auto sample_row = [&](size_t i) {
    try {
      Job& job = *cpu_rows[i].first;
      cpu_tokens[i] = job.request->sample(logits_row(cpu_rows[i].second), job.tokens);
      return true;
    } catch (...) {
      const std::lock_guard lock(failed_mutex);
      failed = std::current_exception();
      return false;
    }
  };
  if (cpu_rows.size() > 1)
    row_pool.run(cpu_rows.size(), sample_row);
  else if (!cpu_rows.empty())
    sample_row(0);
  if (failed) std::rethrow_exception(failed);
  for (size_t i = 0; i < cpu_rows.size(); ++i) {
    Job& job = *cpu_rows[i].first;
    job.request->emit_sampled(cpu_tokens[i], logits_row(cpu_rows[i].second));
    job.tokens.push_back(cpu_tokens[i]);
  }
  if (batch.greedy_only) queue.report_gpu_greedy(static_cast<uint32_t>(row));
  if (batch.top_candidates != 0) {
    queue.report_gpu_greedy(static_cast<uint32_t>(row - top_rows));
    queue.report_gpu_top_candidates(static_cast<uint32_t>(top_rows));
  }
  for (size_t i = running.size(); i-- > 0;)
    if (running[i]->request->generation->done())
      end_running(i, *running[i]->request->generation->stop_kind());
  audit_cache();
}

void GpuEngine::State::audit_cache() {
#if !defined(NDEBUG) || defined(KVTRIE_SANITIZE_BUILD)
  cache.check_invariants();  // the whole audit after every step where speed is not the point
#endif
}

void GpuEngine::State::end(Job& job, StopKind reason) {
  GenerationStats cached;
  cached.cached_tokens = job.hit.cached_tokens;
  cached.cached_tokens_device = job.hit.device_hit_tokens;
  cached.cached_tokens_host = job.hit.host_hit_tokens;
  cached.cached_tokens_disk = job.hit.disk_hit_tokens;
  queue.end(*job.request, reason, cached, job.started() ? job.prompt_size - job.hit.cached_tokens : 0);
}

void GpuEngine::State::end_running(size_t index, StopKind reason) {
  // A read of its prompt's pages still in flight goes on down to where its computing got: what it reads
  // hangs after the pages it committed, cached for a retry (poll_disk_loads finishes it).
  end(*running[index], reason);
  cache.release(running[index]->seq);
  running.erase(running.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace kvtrie::engine
