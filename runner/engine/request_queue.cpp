#include "runner/engine/request_queue.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runner/engine/generation.h"

namespace kvtrie::engine {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

uint32_t context_size(uint32_t requested, uint32_t trained, uint32_t fallback) {
  const uint32_t n = requested ? requested : (trained ? std::min(trained, fallback) : fallback);
  if (trained && n > trained) {
    spdlog::warn("engine: context {} exceeds the model's training context {}; using {}", n, trained, trained);
    return trained;
  }
  return n;
}

const char* submit_error_name(SubmitError error) {
  switch (error) {
    case SubmitError::Overloaded:
      return "overloaded";
    case SubmitError::InvalidRequest:
      return "invalid request";
    case SubmitError::ShuttingDown:
      return "shutting down";
  }
  return "unknown";
}

std::variant<GenerationStream, SubmitRejection> RequestQueue::reject(SubmitError error, std::string message) {
  std::lock_guard lock(mutex_);
  ++counters_.requests_rejected;
  const auto retry = std::chrono::seconds(error == SubmitError::ShuttingDown ? 5 : 1);
  return SubmitRejection{error, std::move(message), retry};
}

std::variant<GenerationStream, SubmitRejection> RequestQueue::submit(GenerateRequest request) {
  if (request.prompt.empty()) return reject(SubmitError::InvalidRequest, "the prompt is empty");
  for (int32_t t : request.prompt)
    if (t < 0 || static_cast<uint32_t>(t) >= info_.n_vocab)
      return reject(SubmitError::InvalidRequest,
                    "token id " + std::to_string(t) + " is outside the vocabulary");
  if (request.prompt.size() >= info_.n_ctx)
    return reject(SubmitError::InvalidRequest, "the prompt has " + std::to_string(request.prompt.size()) +
                                                   " tokens; the context holds " +
                                                   std::to_string(info_.n_ctx));
  if (request.logprobs > 20) return reject(SubmitError::InvalidRequest, "logprobs must be 0..20");
  if (check_)
    if (std::optional<std::string> problem = check_(request))
      return reject(SubmitError::InvalidRequest, *problem);

  auto queued = std::make_unique<Request>();
  queued->params = std::move(request);
  queued->channel = std::make_shared<StreamChannel>();
  queued->submitted = Clock::now();
  GenerationStream stream(queued->channel);
  {
    std::lock_guard lock(mutex_);
    if (!accepting_) {
      ++counters_.requests_rejected;
      return SubmitRejection{SubmitError::ShuttingDown, "the server is shutting down",
                             std::chrono::seconds(5)};
    }
    if (held_ + queue_.size() >= info_.parallel + info_.queue_capacity) {
      ++counters_.requests_rejected;
      return SubmitRejection{SubmitError::Overloaded, "every slot is busy and the queue is full",
                             std::chrono::seconds(1)};
    }
    queue_.push_back(std::move(queued));
    ++counters_.requests_submitted;
  }
  wake_.notify_all();
  return stream;
}

bool RequestQueue::has_free_slot() const {
  std::lock_guard lock(mutex_);
  return accepting_ && held_ + queue_.size() < info_.parallel;
}

EngineCounters RequestQueue::counters() const {
  std::lock_guard lock(mutex_);
  EngineCounters c = counters_;
  c.active = running_;
  c.queued = static_cast<uint32_t>(queue_.size()) + waiting_;
  return c;
}

RequestQueue::Taken RequestQueue::take(size_t count, bool idle) {
  std::unique_lock lock(mutex_);
  if (idle) {
    idle_.notify_all();
    wake_.wait(lock, [&] { return stop_ || !queue_.empty() || !tasks_.empty(); });
  }
  Taken taken;
  taken.tasks.swap(tasks_);
  // Once cancel_all is set every queued request is handed over too: it never started, and ends cancelled.
  while (!queue_.empty() && (cancel_all_ || taken.requests.size() < count)) {
    taken.requests.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  held_ += static_cast<uint32_t>(taken.requests.size());
  taken.cancel_all = cancel_all_;
  taken.stop = stop_;
  return taken;
}

bool RequestQueue::has_news(size_t count) const {
  std::lock_guard lock(mutex_);
  return (count > 0 && !queue_.empty()) || !tasks_.empty() || cancel_all_ || stop_;
}

void RequestQueue::report_step_ahead() {
  std::lock_guard lock(mutex_);
  ++counters_.steps_ahead;
}

void RequestQueue::report_preempted() {
  std::lock_guard lock(mutex_);
  ++counters_.requests_preempted;
}

void RequestQueue::report_gpu_greedy(uint32_t tokens) {
  std::lock_guard lock(mutex_);
  counters_.completion_tokens_gpu_greedy += tokens;
}

void RequestQueue::report_gpu_top_candidates(uint32_t tokens) {
  std::lock_guard lock(mutex_);
  counters_.completion_tokens_gpu_top_candidates += tokens;
}

void RequestQueue::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_all();
}

void RequestQueue::set_gauges(uint32_t running, uint32_t waiting) {
  std::lock_guard lock(mutex_);
  running_ = running;
  waiting_ = waiting;
}

void RequestQueue::end(Request& request, StopKind reason, const GenerationStats& cache,
                       uint32_t computed_tokens) {
  GenerationStats timings;
  timings.cached_tokens = cache.cached_tokens;
  timings.cached_tokens_device = cache.cached_tokens_device;
  timings.cached_tokens_host = cache.cached_tokens_host;
  timings.cached_tokens_disk = cache.cached_tokens_disk;
  timings.prompt_ms = request.prompt_ms;
  if (request.first_token) {
    timings.ttft_ms = ms_between(request.submitted, *request.first_token);
    timings.decode_ms = ms_between(*request.first_token, Clock::now());
  }
  Chunk last;
  if (request.generation) {
    last = request.generation->finish(timings, reason);
  } else {  // it never started
    timings.stop_kind = reason;
    timings.prompt_tokens = static_cast<uint32_t>(request.params.prompt.size());
    last.final = timings;
  }
  GenerationStats& fs = *last.final;
  if (fs.completion_tokens > 1 && fs.decode_ms > 0)
    fs.tokens_per_second = (fs.completion_tokens - 1) / (fs.decode_ms / 1000.0);
  bool idle = false;
  {
    std::lock_guard lock(mutex_);
    if (fs.stop_kind == StopKind::Cancelled)
      ++counters_.requests_cancelled;
    else
      ++counters_.requests_completed;
    counters_.prompt_tokens += fs.prompt_tokens;
    counters_.prompt_tokens_computed += computed_tokens;
    counters_.completion_tokens += fs.completion_tokens;
    --held_;
    idle = held_ == 0 && queue_.empty();
  }
  request.channel->finish(std::move(last));
  if (idle) idle_.notify_all();
}

void RequestQueue::shutdown(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  accepting_ = false;
  idle_.wait_until(lock, Clock::now() + grace, [&] { return held_ == 0 && queue_.empty(); });
  if (held_ != 0 || !queue_.empty())
    spdlog::warn("engine: grace period over, cancelling {} running and {} queued requests", running_,
                 held_ - std::min(held_, running_) + queue_.size());
  cancel_all_ = true;
  stop_ = true;
  lock.unlock();
  wake_.notify_all();
}

}  // namespace kvtrie::engine
