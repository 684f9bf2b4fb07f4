// Contract: the daemon's configuration as one plain struct with defaults, filled by the CLI (flags, KVTRIE_*
// environment variables, the config file) or by the llama-server / legacy-runner argument parsers, then read
// by the daemon. No globals; copy freely.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/engine/batch_tokens.h"

namespace kvtrie::server {

// Which HTTP protocol the daemon speaks (one per process, chosen by how it was started).
enum class ApiMode {
  Native,        // kvtrie serve
  LlamaServer,   // started as llama-server (Ollama's current runner)
  OllamaRunner,  // kvtrie runner (Ollama's older runner protocol)
};

struct ServeOptions {
  ApiMode mode = ApiMode::Native;
  std::string model;  // GGUF path; empty only for llama-server device discovery
  std::string host = "127.0.0.1";
  uint16_t port = 11435;
  uint32_t ctx_size = 4096;  // tokens per sequence; 0: the model's training context
  uint32_t parallel = 4;     // sequences decoded together
  uint32_t queue = 64;       // requests waiting for a slot before 503
  uint32_t batch_tokens = engine::kDefaultBatchTokens;  // tokens of one forward pass at most (prefill chunks)
  uint64_t kv_device_mb = 0;                            // 0: from free memory
  uint64_t kv_host_mb = 0;
  std::string kv_disk_dir;          // disk tier directory ("": none)
  uint64_t kv_disk_mb = 0;          // disk tier budget (0: none)
  bool no_kv_disk_overlap = false;  // a disk hit waits for its whole read (GpuEngineConfig::kv_disk_overlap)
  std::optional<uint32_t> device;   // Vulkan device index; unset: the preferred one
  bool deterministic = false;
  bool cpu_reference = false;  // serve with the CPU reference engine (tiny models, tests)
  std::string log_level = "info";
  uint32_t shutdown_grace_ms = 5000;
  uint32_t max_body_mb = 8;
  std::string chat_template;  // built-in chat template name forced by --chat-template ("": the model's)
  bool verbose = false;
  // Security (docs/security.md). With no key every endpoint is open, as on a single-user machine.
  std::vector<std::string> api_keys;  // user keys, each its own tenant
  std::string api_key_file;           // lines "KEY [TENANT] [admin]", re-read on SIGHUP
  bool metrics_public = false;        // /metrics without a key
  double tenant_kv_share = 1.0;       // a tenant's share of the device KV tier (1: no limit)
  std::string ssl_cert_file;          // both set: HTTPS only
  std::string ssl_key_file;
  // KV events for prefix-aware routers (docs/scale-out.md); off while kv_events is empty.
  std::string kv_events;         // ZMQ PUB endpoint, vLLM's --kv-events-config endpoint
  std::string kv_events_replay;  // ZMQ ROUTER endpoint answering replay requests ("": none)
  std::string kv_events_topic;   // first frame of every message
};

}  // namespace kvtrie::server
