// Contract: the engine-independent front of an Engine: validates and admits requests from any thread, holds
// them until the engine thread takes them, counts them, and runs the shutdown protocol (stop accepting, let
// running work finish for a grace period, then ask the engine thread to cancel the rest and stop). Every
// public method is thread-safe. The engine thread calls take() in its loop and report_finished() for every
// request it ends; it exits when take() returns stop.
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

namespace kvtrie::engine {

using Clock = std::chrono::steady_clock;

// Tokens per sequence: `requested` (0: the model's training context, else `fallback`), never beyond the
// training context when the model states one (logged).
uint32_t context_size(uint32_t requested, uint32_t trained, uint32_t fallback);
double ms_between(Clock::time_point a, Clock::time_point b);

// What an engine keeps of a request it preempted (generated tokens, sampler and detokenizer state) while the
// request waits in the queue to resume. Opaque to the queue; the engine that made it reads it back.
struct ResumeState {
  virtual ~ResumeState() = default;
};

// A request waiting for, or holding, a slot of the engine.
struct QueuedRequest {
  GenerateRequest request;
  std::shared_ptr<StreamChannel> channel;
  Clock::time_point submitted;
  std::unique_ptr<ResumeState> resume;  // set while a preempted request waits to resume
};

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

  // Engine thread. Hands over up to `free_slots` queued requests. When `idle` (nothing running), blocks until
  // a request arrives or stop is requested. `stop` is set once the engine must cancel what it runs and exit;
  // `cancel_all` while it must cancel everything running.
  struct Taken {
    std::vector<std::unique_ptr<QueuedRequest>> requests;
    std::vector<std::function<void()>> tasks;  // posted with post(), to run on the engine thread
    bool cancel_all = false;
    bool stop = false;
  };
  Taken take(size_t free_slots, bool idle);
  // Engine thread: puts a request it could not start yet (or preempted) back at the front.
  void put_back(std::unique_ptr<QueuedRequest> request);
  // Engine thread: a running request was preempted (counted in EngineCounters::requests_preempted).
  void report_preempted();
  // Engine thread: the number of requests it holds now (a gauge; wakes shutdown() when it reaches zero).
  void set_active(uint32_t active);
  // Engine thread: a request ended with these final stats; `computed_tokens` prompt tokens were computed.
  void report_finished(const GenerationStats& stats, uint32_t computed_tokens);

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
  std::deque<std::unique_ptr<QueuedRequest>> queue_;
  std::vector<std::function<void()>> tasks_;
  uint32_t active_ = 0;
  bool accepting_ = true;
  bool cancel_all_ = false;
  bool stop_ = false;
  EngineCounters counters_;
};

// The final chunk of a request: flushes its Generation (when it started) with the engine's timings and fills
// tokens_per_second. `generation` may be null when the request ended before its prompt ran.
class Generation;
Chunk final_chunk(Generation* generation, const QueuedRequest& request, GenerationStats timings,
                  StopKind reason);

}  // namespace kvtrie::engine
