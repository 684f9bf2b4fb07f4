#include "runner/engine/reference_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <list>
#include <thread>

#include "base/error.h"
#include "runner/engine/generation.h"
#include "runner/engine/request_queue.h"
#include "runner/model/gguf_file.h"
#include "runner/reference/reference_model.h"
#include "runner/sampler.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::engine {

// One request on the worker thread. (Not "Job": the GPU engine's Job (gpu_engine_state.h) has that name in
// this namespace, and two classes of one name are one class to the linker: ASan caught make_unique<Job>
// here building the other one.)
struct ReferenceJob {
  std::unique_ptr<Request> request;
  std::optional<reference::ReferenceModel::Sequence> sequence;  // set when the prompt has run
  std::vector<float> logits;                                    // of the last token fed
  std::vector<int32_t> history;  // prompt + generated: the repeat-penalty window
};

struct ReferenceEngine::State {
  const Tokenizer& tokenizer;
  reference::ReferenceModel model;
  EngineInfo info;
  RequestQueue queue{info};
  std::thread worker;

  State(const GgufFile& file, const Tokenizer& tok) : tokenizer(tok), model(file) {}

  void run();
  void step(ReferenceJob& job);
  void finish(ReferenceJob& job, StopKind reason);
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
  std::list<std::unique_ptr<ReferenceJob>> running;
  for (;;) {
    RequestQueue::Taken taken = queue.take(info.parallel - running.size(), running.empty());
    for (auto& task : taken.tasks) task();
    for (auto& request : taken.requests) {
      auto job = std::make_unique<ReferenceJob>();
      job->request = std::move(request);
      running.push_back(std::move(job));
    }
    if (taken.stop && running.empty()) return;
    // Round-robin: each running job gets one step (its whole prompt, or one token) per turn.
    for (auto it = running.begin(); it != running.end();) {
      ReferenceJob& job = **it;
      if (taken.cancel_all || job.request->channel->cancelled()) {
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
      it = job.request->channel->finished() ? running.erase(it) : std::next(it);
    }
    queue.set_gauges(static_cast<uint32_t>(running.size()), 0);
  }
}

void ReferenceEngine::State::step(ReferenceJob& job) {
  Request& request = *job.request;
  if (!job.sequence) {
    const auto t0 = Clock::now();
    job.sequence = model.new_sequence();
    job.logits = model.forward_batch(*job.sequence, request.params.prompt);
    request.prompt_ms = ms_between(t0, Clock::now());
    request.start_output(tokenizer, info.n_ctx);
    job.history = request.params.prompt;
    if (request.generation->done()) return finish(job, StopKind::Length);
  }
  const int32_t token = request.sample_and_emit(job.logits, job.history);
  if (request.generation->done()) return finish(job, *request.generation->stop_kind());
  job.history.push_back(token);
  job.logits = model.forward(*job.sequence, token);
}

void ReferenceEngine::State::finish(ReferenceJob& job, StopKind reason) {
  // No prefix cache: a request that ran its prompt computed all of it.
  const uint32_t computed = job.sequence ? static_cast<uint32_t>(job.request->params.prompt.size()) : 0;
  queue.end(*job.request, reason, GenerationStats{}, computed);
}

}  // namespace kvtrie::engine
