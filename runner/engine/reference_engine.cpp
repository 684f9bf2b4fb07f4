#include "runner/engine/reference_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "kernels/error.h"
#include "runner/engine/generation.h"
#include "runner/model/gguf_file.h"
#include "runner/reference/reference_model.h"
#include "runner/sampler.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::engine {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

const char* submit_error_name(SubmitError error) {
  switch (error) {
    case SubmitError::Overloaded: return "overloaded";
    case SubmitError::InvalidRequest: return "invalid request";
    case SubmitError::ShuttingDown: return "shutting down";
  }
  return "unknown";
}

// One request on the worker thread.
struct Job {
  GenerateRequest request;
  std::shared_ptr<StreamChannel> channel;
  Clock::time_point submitted;
  std::optional<reference::ReferenceModel::Sequence> sequence;  // set when the prompt has run
  std::unique_ptr<Generation> generation;
  std::unique_ptr<Sampler> sampler;
  std::vector<float> logits;  // of the last token fed
  std::vector<int32_t> history;  // prompt + generated: the repeat-penalty window
  double prompt_ms = 0;
  Clock::time_point first_token{};
  bool has_first_token = false;
};

struct ReferenceEngine::State {
  const Tokenizer& tokenizer;
  reference::ReferenceModel model;
  EngineInfo info;

  mutable std::mutex mutex;
  std::condition_variable wake;       // work arrived, or stop requested
  std::condition_variable idle_cv;    // the worker has nothing left
  std::deque<std::unique_ptr<Job>> queue;
  uint32_t active = 0;                // jobs the worker holds (guarded by mutex, written by the worker)
  bool accepting = true;
  bool cancel_all = false;
  bool stop = false;
  EngineCounters counters;
  std::thread worker;

  State(const GgufFile& file, const Tokenizer& tok) : tokenizer(tok), model(file) {}

  void run();
  void step(Job& job);
  void finish(Job& job, StopKind reason);
};

ReferenceEngine::ReferenceEngine(const GgufFile& file, const Tokenizer& tokenizer, ReferenceEngineConfig config)
    : state_(std::make_unique<State>(file, tokenizer)) {
  const ModelConfig& mc = state_->model.config();
  EngineInfo& info = state_->info;
  info.name = "reference-cpu";
  info.device = "CPU reference (float32)";
  info.n_vocab = mc.n_vocab;
  uint32_t train = mc.n_ctx_train ? mc.n_ctx_train : 4096;
  info.n_ctx = config.n_ctx ? config.n_ctx : std::min<uint32_t>(train, 4096);
  if (mc.n_ctx_train && info.n_ctx > mc.n_ctx_train) {
    spdlog::warn("engine: context {} exceeds the model's training context {}; using {}", info.n_ctx,
                 mc.n_ctx_train, mc.n_ctx_train);
    info.n_ctx = mc.n_ctx_train;
  }
  info.parallel = std::max<uint32_t>(1, config.parallel);
  info.queue_capacity = config.queue_capacity;
  spdlog::warn("engine: serving with the CPU REFERENCE engine (float32 on one CPU thread, no Vulkan, no prefix "
               "cache): meant for tiny models and tests, not production");
  spdlog::info("engine: reference-cpu n_ctx={} parallel={} queue={} vocab={}", info.n_ctx, info.parallel,
               info.queue_capacity, info.n_vocab);
  state_->worker = std::thread([s = state_.get()] { s->run(); });
}

ReferenceEngine::~ReferenceEngine() { shutdown(std::chrono::milliseconds(0)); }

const EngineInfo& ReferenceEngine::info() const { return state_->info; }

std::variant<GenerationStream, SubmitRejection> ReferenceEngine::submit(GenerateRequest request) {
  State& s = *state_;
  auto reject = [&](SubmitError e, std::string msg) -> std::variant<GenerationStream, SubmitRejection> {
    std::lock_guard lock(s.mutex);
    ++s.counters.requests_rejected;
    return SubmitRejection{e, std::move(msg), std::chrono::seconds(1)};
  };
  if (request.prompt.empty()) return reject(SubmitError::InvalidRequest, "the prompt is empty");
  for (int32_t t : request.prompt)
    if (t < 0 || static_cast<uint32_t>(t) >= s.info.n_vocab)
      return reject(SubmitError::InvalidRequest, "token id " + std::to_string(t) + " is outside the vocabulary");
  if (request.prompt.size() >= s.info.n_ctx)
    return reject(SubmitError::InvalidRequest, "the prompt has " + std::to_string(request.prompt.size()) +
                                                   " tokens; the context holds " + std::to_string(s.info.n_ctx));
  if (request.logprobs > 20) return reject(SubmitError::InvalidRequest, "logprobs must be 0..20");

  auto job = std::make_unique<Job>();
  job->request = std::move(request);
  job->channel = std::make_shared<StreamChannel>();
  job->submitted = Clock::now();
  GenerationStream stream(job->channel);
  {
    std::lock_guard lock(s.mutex);
    if (!s.accepting) {
      ++s.counters.requests_rejected;
      return SubmitRejection{SubmitError::ShuttingDown, "the server is shutting down", std::chrono::seconds(5)};
    }
    if (s.active + s.queue.size() >= s.info.parallel + s.info.queue_capacity) {
      ++s.counters.requests_rejected;
      return SubmitRejection{SubmitError::Overloaded, "every slot is busy and the queue is full",
                             std::chrono::seconds(1)};
    }
    s.queue.push_back(std::move(job));
    ++s.counters.requests_submitted;
  }
  s.wake.notify_all();
  return stream;
}

bool ReferenceEngine::has_free_slot() const {
  std::lock_guard lock(state_->mutex);
  return state_->accepting && state_->active + state_->queue.size() < state_->info.parallel;
}

EngineCounters ReferenceEngine::counters() const {
  std::lock_guard lock(state_->mutex);
  EngineCounters c = state_->counters;
  c.active = state_->active;
  c.queued = static_cast<uint32_t>(state_->queue.size());
  return c;
}

CacheStats ReferenceEngine::cache_stats() const { return CacheStats{}; }  // no prefix cache: honest zeros

FlushResult ReferenceEngine::flush_cache() { return FlushResult{}; }

void ReferenceEngine::shutdown(std::chrono::milliseconds grace) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  s.accepting = false;
  const auto deadline = Clock::now() + grace;
  s.idle_cv.wait_until(lock, deadline, [&] { return s.active == 0 && s.queue.empty(); });
  if (s.active != 0 || !s.queue.empty())
    spdlog::warn("engine: grace period over, cancelling {} running and {} queued requests", s.active,
                 s.queue.size());
  s.cancel_all = true;
  s.stop = true;
  lock.unlock();
  s.wake.notify_all();
  if (s.worker.joinable() && s.worker.get_id() != std::this_thread::get_id()) s.worker.join();
}

void ReferenceEngine::State::run() {
  std::list<std::unique_ptr<Job>> running;
  for (;;) {
    {
      std::unique_lock lock(mutex);
      while (running.size() < info.parallel && !queue.empty()) {
        running.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      active = static_cast<uint32_t>(running.size());
      if (running.empty()) {
        idle_cv.notify_all();
        if (stop) return;
        wake.wait(lock, [&] { return stop || !queue.empty(); });
        continue;
      }
    }
    // Round-robin: each running job gets one step (its whole prompt, or one token) per turn.
    for (auto it = running.begin(); it != running.end();) {
      Job& job = **it;
      bool cancel;
      {
        std::lock_guard lock(mutex);
        cancel = cancel_all;
      }
      if (cancel || job.channel->cancelled()) {
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
      if (job.channel->finished()) {
        std::lock_guard lock(mutex);
        it = running.erase(it);
        active = static_cast<uint32_t>(running.size());
      } else {
        ++it;
      }
    }
  }
}

void ReferenceEngine::State::step(Job& job) {
  if (!job.sequence) {
    const auto t0 = Clock::now();
    job.sequence = model.new_sequence();
    job.logits = model.forward_batch(*job.sequence, job.request.prompt);
    job.prompt_ms = ms_between(t0, Clock::now());
    job.generation = std::make_unique<Generation>(tokenizer, job.request, info.n_ctx);
    job.sampler = std::make_unique<Sampler>(job.request.sampling);
    job.history = job.request.prompt;
    if (job.generation->done()) return finish(job, StopKind::Length);
  }
  std::optional<TokenLogprob> lp;
  const int32_t token = job.sampler->sample(job.logits, job.history);
  if (!job.has_first_token) {
    job.has_first_token = true;
    job.first_token = Clock::now();
  }
  // The sampler does not modify the logits: logprobs are of the raw row.
  if (job.request.logprobs > 0) lp = make_token_logprob(job.logits, token, job.request.logprobs);
  Chunk chunk = job.generation->accept(token, std::move(lp));
  if (!chunk.tokens.empty() || !chunk.text.empty()) job.channel->push(std::move(chunk));
  if (job.generation->done()) return finish(job, *job.generation->stop_kind());
  job.history.push_back(token);
  job.logits = model.forward(*job.sequence, token);
}

void ReferenceEngine::State::finish(Job& job, StopKind reason) {
  const auto now = Clock::now();
  GenerationStats stats;
  stats.prompt_ms = job.prompt_ms;
  if (job.has_first_token) {
    stats.ttft_ms = ms_between(job.submitted, job.first_token);
    stats.decode_ms = ms_between(job.first_token, now);
  }
  Chunk last;
  if (job.generation) {
    last = job.generation->finish(stats, reason);
  } else {
    stats.stop_kind = reason;
    stats.prompt_tokens = static_cast<uint32_t>(job.request.prompt.size());
    last.final = stats;
  }
  GenerationStats& fs = *last.final;
  if (fs.completion_tokens > 1 && fs.decode_ms > 0)
    fs.tokens_per_second = (fs.completion_tokens - 1) / (fs.decode_ms / 1000.0);
  {
    std::lock_guard lock(mutex);
    if (fs.stop_kind == StopKind::Cancelled) ++counters.requests_cancelled;
    else ++counters.requests_completed;
    counters.prompt_tokens += fs.prompt_tokens;
    if (job.sequence) counters.prompt_tokens_computed += fs.prompt_tokens;
    counters.completion_tokens += fs.completion_tokens;
  }
  job.channel->finish(std::move(last));
}

}  // namespace kvtrie::engine
