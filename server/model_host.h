// Contract: the loaded model and its engine, and the daemon's readiness. The daemon creates one ModelHost,
// calls load() once on a background thread, and the HTTP handlers (any thread) read phase() and, once Ready,
// model(), which stays valid until the ModelHost is destroyed (after the HTTP server has stopped). The
// engine is chosen and built by the runner (engine::make_engine: the Vulkan GpuEngine, which owns its device;
// the CPU reference with --cpu-reference), so server/ never names an engine type or a Vulkan object.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "runner/engine/engine.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "runner/tokenizer/tokenizer.h"
#include "server/chat_template.h"
#include "server/kv_event_publisher.h"
#include "server/options.h"

namespace kvtrie::server {

struct LoadedModel {
  LoadedModel(GgufFile f, ModelConfig c) : file(std::move(f)), config(std::move(c)) {}
  GgufFile file;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<KvEventPublisher> kv_events;  // --kv-events (null when off); the engine's cache uses it
  std::unique_ptr<engine::Engine>
      engine;                 // declared last: destroyed first, it uses the tokenizer and kv_events
  std::string name;           // general.name, else the file name
  std::string chat_template;  // tokenizer.chat_template metadata ("" when absent)
  ChatFormat chat_format;     // what chat requests are rendered with (choose_chat_format)
};

// The chat format for a model: the --chat-template name when given (`forced`; an unknown one is logged and
// ignored), else the family recognised in the model's Jinja template, else ChatML; logs which and why.
ChatFormat choose_chat_format(const std::string& forced, const std::string& jinja_source);

class ModelHost {
 public:
  enum class Phase { Loading, Ready, Failed };

  explicit ModelHost(ServeOptions options) : options_(std::move(options)) {}

  // Loads the GGUF, tokenizer and engine; logs the memory-accounting lines. Returns false (phase Failed,
  // failure() set) when the model cannot be served. Call once.
  bool load();

  Phase phase() const { return phase_.load(); }
  float progress() const { return progress_.load(); }
  std::string failure() const;
  const ServeOptions& options() const { return options_; }
  // The model, or nullptr before it is Ready.
  LoadedModel* model() { return phase_.load() == Phase::Ready ? model_.get() : nullptr; }
  // The model, or ApiError(Unavailable, "loading model").
  LoadedModel& require();

 private:
  ServeOptions options_;
  std::unique_ptr<LoadedModel> model_;
  std::atomic<Phase> phase_{Phase::Loading};
  std::atomic<float> progress_{0};
  mutable std::mutex mutex_;
  std::string failure_;
};

}  // namespace kvtrie::server
