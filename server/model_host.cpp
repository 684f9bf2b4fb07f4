#include "server/model_host.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "runner/engine/make_engine.h"
#include "server/http_types.h"

namespace kvtrie::server {

namespace {

uint64_t mib(uint64_t bytes) {
  return (bytes + (1u << 20) - 1) >> 20;
}

// The lines Ollama reads from a runner's log for its memory accounting (SPEC 5): "using device ...",
// "offloaded N/M layers to GPU" and "<word>: <device> <kind> buffer size = X MiB".
void log_memory_accounting(const LoadedModel& m) {
  const auto& c = m.config;
  if (const std::optional<engine::DeviceMemoryUse> use = engine::device_memory_use(*m.engine)) {
    spdlog::info("llama_model_load_from_file_impl: using device Vulkan0 ({}) ({}) - {} MiB free",
                 use->device_name, use->pci_bus_id.empty() ? "0000:00:00.0" : use->pci_bus_id,
                 mib(use->device_local_free));
    spdlog::info("load_tensors: offloaded {}/{} layers to GPU", c.n_layers + 1, c.n_layers + 1);
    spdlog::info("load_tensors: Vulkan0 model buffer size = {} MiB", mib(use->weights));
    spdlog::info("kv_cache: Vulkan0 KV buffer size = {} MiB", mib(use->kv_device));
    spdlog::info("kv_cache: Vulkan_Host KV buffer size = {} MiB", mib(use->kv_host));
    spdlog::info("context: Vulkan0 compute buffer size = {} MiB", mib(use->compute));
    return;
  }
  // The CPU reference engine keeps everything in host memory as float32: device CPU, no offloaded layer.
  const engine::EngineInfo& info = m.engine->info();
  uint64_t params = 0;
  for (const auto& t : m.file.tensors()) params += t.element_count();
  const uint64_t kv_bytes = uint64_t{c.n_layers} * info.n_ctx * info.parallel * c.n_kv_heads *
                            (c.head_dim_k + c.head_dim_v) * sizeof(float);
  const uint64_t compute_bytes =
      uint64_t{c.n_vocab} * sizeof(float) * info.parallel + uint64_t{c.n_ff} * sizeof(float) * 4;
  spdlog::info("load_tensors: offloaded 0/{} layers to GPU", c.n_layers + 1);
  spdlog::info("load_tensors: CPU model buffer size = {} MiB", mib(params * sizeof(float)));
  spdlog::info("kv_cache: CPU KV buffer size = {} MiB", mib(kv_bytes));
  spdlog::info("context: CPU compute buffer size = {} MiB", mib(compute_bytes));
}

// The runner chooses and builds the engine (engine::make_engine); this maps the daemon's options onto it and
// creates model.kv_events with --kv-events.
std::unique_ptr<engine::Engine> start_engine(const ServeOptions& options, LoadedModel& model) {
  engine::EngineOptions e;
  e.cpu_reference = options.cpu_reference;
  e.device = options.device;
  e.n_ctx = options.ctx_size;
  e.parallel = options.parallel;
  e.queue_capacity = options.queue;
  e.batch_tokens = options.batch_tokens;
  e.kv_device_bytes = options.kv_device_mb << 20;
  e.kv_host_bytes = options.kv_host_mb << 20;
  e.kv_disk_dir = options.kv_disk_dir;
  e.kv_disk_bytes = options.kv_disk_mb << 20;
  e.kv_disk_overlap = !options.no_kv_disk_overlap;
  e.deterministic = options.deterministic;
  e.tenant_kv_share = options.tenant_kv_share;
  if (!options.kv_events.empty()) {
    if (options.cpu_reference) {
      spdlog::warn("--kv-events: the CPU reference engine has no prefix cache; no events are published");
    } else {
      model.kv_events = std::make_unique<KvEventPublisher>(
          KvEventPublisherOptions{options.kv_events, options.kv_events_replay, options.kv_events_topic});
      e.kv_events = model.kv_events.get();
    }
  }
  return engine::make_engine(e, model.file, *model.tokenizer);
}

}  // namespace

ChatFormat choose_chat_format(const std::string& forced, const std::string& jinja_source) {
  if (!forced.empty()) {
    if (auto family = chat_template_from_name(forced)) {
      spdlog::info("chat template: {} (--chat-template)", chat_template_name(*family));
      return {*family, {}};
    }
    spdlog::warn("--chat-template {}: not a built-in template ({}); using the model's", forced,
                 chat_template_names());
  }
  if (jinja_source.empty()) {
    spdlog::info("chat template: chatml (the model has no tokenizer.chat_template)");
    return {};
  }
  if (auto format = detect_chat_format(jinja_source)) {
    spdlog::info(
        "chat template: {} (recognised in the model's tokenizer.chat_template){}",
        chat_template_name(format->family),
        format->default_system.empty() ? "" : "; default system message \"" + format->default_system + "\"");
    return *format;
  }
  spdlog::warn(
      "chat template: chatml (the model's tokenizer.chat_template is none of the built-in families: {}; "
      "--chat-template NAME picks one)",
      chat_template_names());
  return {};
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
    if (options_.mode != ApiMode::OllamaRunner)  // the legacy runner protocol has no chat endpoint
      m->chat_format = choose_chat_format(options_.chat_template, m->chat_template);
    spdlog::info("model: {} arch={} layers={} width={} heads={}/{} vocab={} ctx_train={}", m->name,
                 m->config.arch_name, m->config.n_layers, m->config.n_embd, m->config.n_heads,
                 m->config.n_kv_heads, m->config.n_vocab, m->config.n_ctx_train);
    m->engine = start_engine(options_, *m);
    log_memory_accounting(*m);
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
