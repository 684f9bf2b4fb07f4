// Contract: an Engine backed by the CPU float32 ReferenceModel: one worker thread owns the model and every
// sequence's KV, serving up to `parallel` requests round-robin (one prompt or one decode step per turn), with
// up to `queue_capacity` more waiting. Slow and memory-hungry (4 bytes per parameter): for HTTP tests with
// tiny models (`kvtrie serve --cpu-reference`), and it says so in the log. It has no prefix cache: cached
// token counts and cache stats are honest zeros. Thread-safety and lifetimes as in engine.h: every public
// method may be called from any thread; the Tokenizer must outlive the engine; the GgufFile need not (weights
// are copied).
#pragma once
#include <memory>

#include "runner/engine/engine.h"

namespace kvtrie {
class GgufFile;
class Tokenizer;
}  // namespace kvtrie

namespace kvtrie::engine {

struct ReferenceEngineConfig {
  uint32_t n_ctx = 0;  // 0: the model's training context (capped at 4096)
  uint32_t parallel = 4;
  uint32_t queue_capacity = 64;
};

class ReferenceEngine final : public Engine {
 public:
  // Throws InputError when the model cannot be loaded.
  ReferenceEngine(const GgufFile& file, const Tokenizer& tokenizer, ReferenceEngineConfig config);
  ~ReferenceEngine() override;

  const EngineInfo& info() const override;
  std::variant<GenerationStream, SubmitRejection> submit(GenerateRequest request) override;
  bool has_free_slot() const override;
  EngineCounters counters() const override;
  CacheStats cache_stats() const override;
  FlushResult flush_cache() override;
  void shutdown(std::chrono::milliseconds grace) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvtrie::engine
