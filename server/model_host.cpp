#include "server/model_host.h"

#include <spdlog/spdlog.h>

#include "kernels/error.h"
#include "runner/engine/reference_engine.h"
#include "server/http_types.h"

namespace kvtrie::server {

namespace {

uint64_t mib(uint64_t bytes) { return (bytes + (1u << 20) - 1) >> 20; }

// The lines Ollama reads from a runner's log for its memory accounting (SPEC 5): "<word>: <device> <kind>
// buffer size = X MiB" and "offloaded N/M layers to GPU". The CPU reference engine keeps everything in host
// memory as float32, so it reports device CPU and no offloaded layer.
void log_memory_accounting(const LoadedModel& m, const engine::EngineInfo& info) {
  uint64_t params = 0;
  for (const auto& t : m.file.tensors()) params += t.element_count();
  const auto& c = m.config;
  const uint64_t kv_bytes = uint64_t{c.n_layers} * info.n_ctx * info.parallel * c.n_kv_heads *
                            (c.head_dim_k + c.head_dim_v) * sizeof(float);
  const uint64_t compute_bytes = uint64_t{c.n_vocab} * sizeof(float) * info.parallel +
                                 uint64_t{c.n_ff} * sizeof(float) * 4;
  spdlog::info("load_tensors: offloaded 0/{} layers to GPU", c.n_layers + 1);
  spdlog::info("load_tensors: CPU model buffer size = {} MiB", mib(params * sizeof(float)));
  spdlog::info("kv_cache: CPU KV buffer size = {} MiB", mib(kv_bytes));
  spdlog::info("context: CPU compute buffer size = {} MiB", mib(compute_bytes));
}

}  // namespace

std::unique_ptr<engine::Engine> make_engine(const ServeOptions& options, const LoadedModel& model) {
  if (!options.cpu_reference)
    spdlog::warn("engine: the Vulkan engine is not built yet; falling back to the CPU reference engine");
  engine::ReferenceEngineConfig config;
  config.n_ctx = options.ctx_size;
  config.parallel = options.parallel;
  config.queue_capacity = options.queue;
  return std::make_unique<engine::ReferenceEngine>(model.file, *model.tokenizer, config);
}

bool ModelHost::load() {
  try {
    spdlog::info("loading model {}", options_.model);
    GgufFile file = GgufFile::open(options_.model);
    progress_ = 0.2f;
    ModelConfig config = ModelConfig::from_gguf(file);
    auto m = std::make_unique<LoadedModel>(std::move(file), std::move(config));
    m->tokenizer = Tokenizer::from_gguf(m->file);
    progress_ = 0.4f;
    m->name = m->config.model_name.empty() ? m->file.path().filename().string() : m->config.model_name;
    if (auto tmpl = m->file.get_string("tokenizer.chat_template")) m->chat_template = std::string(*tmpl);
    spdlog::info("model: {} arch={} layers={} width={} heads={}/{} vocab={} ctx_train={}", m->name,
                 m->config.arch_name, m->config.n_layers, m->config.n_embd, m->config.n_heads,
                 m->config.n_kv_heads, m->config.n_vocab, m->config.n_ctx_train);
    m->engine = make_engine(options_, *m);
    log_memory_accounting(*m, m->engine->info());
    model_ = std::move(m);
    progress_ = 1.0f;
    phase_ = Phase::Ready;
    return true;
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mutex_);
      failure_ = e.what();
    }
    spdlog::error("cannot load model {}: {}", options_.model, e.what());
    phase_ = Phase::Failed;
    return false;
  }
}

std::string ModelHost::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

LoadedModel& ModelHost::require() {
  if (LoadedModel* m = model()) return *m;
  if (phase_.load() == Phase::Failed) throw ApiError(ErrorType::Unavailable, "the model failed to load");
  throw ApiError(ErrorType::Unavailable, "loading model", 1);
}

}  // namespace kvtrie::server
