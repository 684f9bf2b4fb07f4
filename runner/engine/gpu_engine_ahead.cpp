// The GpuEngine's steps ahead (GpuEngineConfig::greedy_ahead): while every running request decodes greedily
// on the GPU and none waits, each decode step is submitted while the one before runs, its tokens that step's
// argmax read on the device (GpuModel::submit, Batch::fed), as SGLang's overlap scheduler and vLLM's async
// scheduling keep the device busy. The host's work between two steps (the read-back, the tokens' text and
// stop checks, the commits, the next batch) then runs beside the device's. The chain stops, after the step
// in flight, when anything changes: a request, a task or a stop arrives, a request is cancelled or ends, a
// sequence is one token from its limit or finds no KV page; the engine loop then goes on as before.
// A step ahead for a request that the step before ended (end of text, a stop string) is the device's work
// only: its KV slot was reserved and is never committed, and the sequence is released only once no step is
// in flight (nothing else may take its pages while the device still writes them).
#include <algorithm>

#include "runner/engine/gpu_engine_state.h"

namespace kvtrie::engine {

bool GpuEngine::State::may_go_ahead() const {
  if (!config.greedy_ahead || !batch.greedy_only || !waiting.empty() || cache.disk_loads_in_flight() > 0 ||
      scheduled.size() != running.size())
    return false;
  return std::all_of(scheduled.begin(), scheduled.end(),
                     [](const Scheduled& s) { return s.tokens == 1 && s.sampled; });
}

bool GpuEngine::State::chain_continues() {
  if (queue.has_news(config.parallel - running.size())) return false;
  for (const Job* job : ahead) {
    // The step in flight decodes tokens[computed]; the next one, tokens[computed + 1], its output. Not when
    // that output ends the request by length, nor after a cancel.
    if (job->request->channel->cancelled() || job->tokens.size() + 1 >= job->max_tokens_total) return false;
  }
  for (const Job* job : ahead)
    if (cache.reserve(job->seq, job->computed + 2) != ReserveStatus::Ok) return false;
  return true;
}

void GpuEngine::State::build_fed_batch() {
  batch.clear();
  batch.greedy_only = true;
  batch.fed = true;
  for (const Job* job : ahead) {
    const uint32_t seq = batch.add_sequence(cache.page_table(job->seq));
    batch.tokens.push_back(0);  // the step in flight's token, read on the device
    batch.positions.push_back(job->computed + 1);
    batch.seq.push_back(seq);
    batch.logits_for.push_back(static_cast<uint32_t>(batch.tokens.size() - 1));
  }
}

void GpuEngine::State::take_chain_tokens(std::span<const int32_t> tokens) {
  uint32_t taken = 0;
  for (size_t row = 0; row < ahead.size(); ++row) {
    Job& job = *ahead[row];
    Request& request = *job.request;
    if (request.generation->done()) continue;  // ended by the step before: this row ran ahead for nothing
    cache.commit(job.seq, std::span<const int32_t>(job.tokens).subspan(job.computed, 1));
    ++job.computed;
    if (request.prompt_ms == 0) request.prompt_ms = ms_between(job.prompt_started, Clock::now());
    request.emit_picked(tokens[row]);
    job.tokens.push_back(tokens[row]);
    ++taken;
  }
  queue.report_gpu_greedy(taken);
  audit_cache();
}

void GpuEngine::State::run_ahead() {
  ahead.clear();
  for (const Scheduled& s : scheduled) ahead.push_back(s.job);
  model.submit(batch);
  for (;;) {
    bool next = chain_continues();
    if (next) {
      build_fed_batch();
      model.submit(batch);
      queue.report_step_ahead();
    }
    take_chain_tokens(model.collect());
    const bool ended = std::any_of(ahead.begin(), ahead.end(),
                                   [](const Job* job) { return job->request->generation->done(); });
    if (next && ended) {
      take_chain_tokens(model.collect());  // the rows of the jobs still running
      next = false;
    }
    cache.poll();
    if (!next) break;
    publish_stats();
    update_gauges();
  }
  for (size_t i = running.size(); i-- > 0;)
    if (running[i]->request->generation->done())
      end_running(i, *running[i]->request->generation->stop_kind());
}

}  // namespace kvtrie::engine
