// Contract: the engine-independent front of an Engine: validates and admits requests from any thread, owns
// each Request (runner/engine/request.h) until the engine thread takes it, counts them, ends them, and runs
// the shutdown protocol (stop accepting, let the engine's work finish for a grace period, then ask the
// engine thread to cancel the rest and stop). Every public method is thread-safe. The engine thread calls
// take() in its loop, set_gauges() after each step (the only writer of the active and waiting gauges) and
// end() for every request it was handed (the only way a request ends); it exits when take() returns stop.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runner/engine/engine.h"
#include "runner/engine/request.h"

namespace kvtrie::engine {

// Tokens per sequence: `requested` (0: the model's training context, else `fallback`), never beyond the
// training context when the model states one (logged).
uint32_t context_size(uint32_t requested, uint32_t trained, uint32_t fallback);
double ms_between(Clock::time_point a, Clock::time_point b);

class RequestQueue {
 public:
  // An engine's own limit on a request, checked at submit after the common ones: a message rejects the
  // request as InvalidRequest. Called on the submitting thread; must not touch engine-thread state.
  using RequestCheck = std::function<std::optional<std::string>(const GenerateRequest&)>;
  // `info` must outlive the queue (the engine's EngineInfo).
  explicit RequestQueue(const EngineInfo& info, RequestCheck check = {})
      : info_(info), check_(std::move(check)) {}

  std::variant<GenerationStream, SubmitRejection> submit(GenerateRequest request);
  bool has_free_slot() const;
  EngineCounters counters() const;

  // Engine thread. Hands over up to `count` queued requests (every one once cancel_all is set: they end
  // cancelled); the engine owns them from now on. When `idle` (it holds no request), blocks until a request
  // arrives, a task is posted or stop is requested. `stop` is set once the engine must cancel what it holds
  // and exit; `cancel_all` while it must cancel everything it holds.
  struct Taken {
    std::vector<std::unique_ptr<Request>> requests;
    std::vector<std::function<void()>> tasks;  // posted with post(), to run on the engine thread
    bool cancel_all = false;
    bool stop = false;
  };
  Taken take(size_t count, bool idle);
  // Engine thread, without blocking: whether take(count, false) would hand over anything (a request, a task,
  // cancel_all or stop).
  bool has_news(size_t count) const;
  // Engine thread: a running request was preempted (counted in EngineCounters::requests_preempted).
  void report_preempted();
  // Engine thread: `tokens` completion tokens of a step were picked on the GPU (Batch::greedy_only).
  void report_gpu_greedy(uint32_t tokens);
  void report_gpu_top_candidates(uint32_t tokens);
  // Engine thread: a decode step was submitted while the step before ran (EngineCounters::steps_ahead).
  void report_step_ahead();
  // Engine thread, after each step: how many of the requests it holds are running and how many wait (the
  // EngineCounters gauges active and, with the queue's own, queued).
  void set_gauges(uint32_t running, uint32_t waiting);
  // Engine thread: ends a request it was handed, by `reason` unless its Generation ended first: flushes its
  // Generation (a request that never started reports its prompt size only), fills the final stats from
  // `cache` (the cached_tokens counts), the request's timings and tokens_per_second, counts it with
  // `computed_tokens` prompt tokens computed, and pushes the final chunk. The request must not be used
  // after, but for dropping it.
  void end(Request& request, StopKind reason, const GenerationStats& cache = {},
           uint32_t computed_tokens = 0);

  // Any thread: runs `task` on the engine thread at its next turn (wakes it when idle).
  void post(std::function<void()> task);

  // Any thread: see Engine::shutdown. Returns once the engine is asked to stop; the caller joins its thread.
  void shutdown(std::chrono::milliseconds grace);

 private:
  std::variant<GenerationStream, SubmitRejection> reject(SubmitError error, std::string message);

  const EngineInfo& info_;
  const RequestCheck check_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // work arrived, or stop requested
  std::condition_variable idle_;  // the engine holds nothing
  std::deque<std::unique_ptr<Request>> queue_;
  std::vector<std::function<void()>> tasks_;
  uint32_t held_ = 0;     // handed to the engine and not ended yet
  uint32_t running_ = 0;  // gauges set by the engine: of held_, running and waiting
  uint32_t waiting_ = 0;
  bool accepting_ = true;
  bool cancel_all_ = false;
  bool stop_ = false;
  EngineCounters counters_;
};

}  // namespace kvtrie::engine
