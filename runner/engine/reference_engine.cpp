#include "runner/engine/reference_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <list>
#include <thread>

#include "kernels/error.h"
#include "runner/engine/generation.h"
#include "runner/engine/request_queue.h"
#include "runner/model/gguf_file.h"
#include "runner/reference/reference_model.h"
#include "runner/sampler.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::engine {

// One request on the worker thread.
struct Job {
  std::unique_ptr<QueuedRequest> queued;
  std::optional<reference::ReferenceModel::Sequence> sequence;  // set when the prompt has run
  std::unique_ptr<Generation> generation;
  std::unique_ptr<Sampler> sampler;
  std::vector<float> logits;     // of the last token fed
  std::vector<int32_t> history;  // prompt + generated: the repeat-penalty window
  double prompt_ms = 0;
  Clock::time_point first_token{};
  bool has_first_token = false;
};

struct ReferenceEngine::State {
  const Tokenizer& tokenizer;
  reference::ReferenceModel model;
  EngineInfo info;
  RequestQueue queue{info};
  std::thread worker;

  State(const GgufFile& file, const Tokenizer& tok) : tokenizer(tok), model(file) {}

  void run();
  void step(Job& job);
  void finish(Job& job, StopKind reason);
};

ReferenceEngine::ReferenceEngine(const GgufFile& file, const Tokenizer& tokenizer,
                                 ReferenceEngineConfig config)
    : state_(std::make_unique<State>(file, tokenizer)) {
  const ModelConfig& mc = state_->model.config();
  EngineInfo& info = state_->info;
  info.name = "reference-cpu";
  info.device = "CPU reference (float32)";
  info.n_vocab = mc.n_vocab;
  info.n_ctx = context_size(config.n_ctx, mc.n_ctx_train, 4096);
  info.parallel = std::max<uint32_t>(1, config.parallel);
  info.queue_capacity = config.queue_capacity;
  spdlog::warn(
      "engine: serving with the CPU REFERENCE engine (float32 on one CPU thread, no Vulkan, no prefix "
      "cache): meant for tiny models and tests, not production");
  spdlog::info("engine: reference-cpu n_ctx={} parallel={} queue={} vocab={}", info.n_ctx, info.parallel,
               info.queue_capacity, info.n_vocab);
  state_->worker = std::thread([s = state_.get()] { s->run(); });
}

ReferenceEngine::~ReferenceEngine() {
  shutdown(std::chrono::milliseconds(0));
}

const EngineInfo& ReferenceEngine::info() const {
  return state_->info;
}

std::variant<GenerationStream, SubmitRejection> ReferenceEngine::submit(GenerateRequest request) {
  return state_->queue.submit(std::move(request));
}

bool ReferenceEngine::has_free_slot() const {
  return state_->queue.has_free_slot();
}

EngineCounters ReferenceEngine::counters() const {
  return state_->queue.counters();
}

CacheStats ReferenceEngine::cache_stats() const {
  return CacheStats{};
}  // no prefix cache: honest zeros

FlushResult ReferenceEngine::flush_cache() {
  return FlushResult{};
}

void ReferenceEngine::shutdown(std::chrono::milliseconds grace) {
  state_->queue.shutdown(grace);
  if (state_->worker.joinable() && state_->worker.get_id() != std::this_thread::get_id())
    state_->worker.join();
}

void ReferenceEngine::State::run() {
  std::list<std::unique_ptr<Job>> running;
  for (;;) {
    RequestQueue::Taken taken = queue.take(info.parallel - running.size(), running.empty());
    for (auto& task : taken.tasks) task();
    for (auto& queued : taken.requests) {
      auto job = std::make_unique<Job>();
      job->queued = std::move(queued);
      running.push_back(std::move(job));
    }
    if (taken.stop && running.empty()) return;
    // Round-robin: each running job gets one step (its whole prompt, or one token) per turn.
    for (auto it = running.begin(); it != running.end();) {
      Job& job = **it;
      if (taken.cancel_all || job.queued->channel->cancelled()) {
        finish(job, StopKind::Cancelled);
      } else {
        try {
          step(job);
        } catch (const std::exception& e) {
          // A broken invariant in one request must not take the daemon down: end that request.
          spdlog::error("engine: request failed: {}", e.what());
          finish(job, StopKind::Cancelled);
        }
      }
      it = job.queued->channel->finished() ? running.erase(it) : std::next(it);
    }
    queue.set_active(static_cast<uint32_t>(running.size()));
  }
}

void ReferenceEngine::State::step(Job& job) {
  if (!job.sequence) {
    const auto t0 = Clock::now();
    job.sequence = model.new_sequence();
    job.logits = model.forward_batch(*job.sequence, job.queued->request.prompt);
    job.prompt_ms = ms_between(t0, Clock::now());
    const GenerateRequest& request = job.queued->request;
    job.generation = std::make_unique<Generation>(tokenizer, request, info.n_ctx);
    job.sampler = std::make_unique<Sampler>(request.sampling);
    job.history = request.prompt;
    if (job.generation->done()) return finish(job, StopKind::Length);
  }
  std::optional<TokenLogprob> lp;
  const int32_t token = job.sampler->sample(job.logits, job.history);
  if (!job.has_first_token) {
    job.has_first_token = true;
    job.first_token = Clock::now();
  }
  // The sampler does not modify the logits: logprobs are of the raw row.
  const uint32_t logprobs = job.queued->request.logprobs;
  if (logprobs > 0) lp = make_token_logprob(job.logits, token, logprobs);
  Chunk chunk = job.generation->accept(token, std::move(lp));
  if (!chunk.tokens.empty() || !chunk.text.empty()) job.queued->channel->push(std::move(chunk));
  if (job.generation->done()) return finish(job, *job.generation->stop_kind());
  job.history.push_back(token);
  job.logits = model.forward(*job.sequence, token);
}

void ReferenceEngine::State::finish(Job& job, StopKind reason) {
  GenerationStats timings;
  timings.prompt_ms = job.prompt_ms;
  if (job.has_first_token) {
    timings.ttft_ms = ms_between(job.queued->submitted, job.first_token);
    timings.decode_ms = ms_between(job.first_token, Clock::now());
  }
  Chunk last = final_chunk(job.generation.get(), *job.queued, timings, reason);
  queue.report_finished(*last.final, job.sequence ? last.final->prompt_tokens : 0);
  job.queued->channel->finish(std::move(last));
}

}  // namespace kvtrie::engine
