// Contract: the daemon's way into the runner: which Vulkan devices there are (list_devices), the one place
// that chooses and builds an Engine (make_engine: the Vulkan GpuEngine, which then owns its device, or the
// CPU ReferenceEngine with cpu_reference), and what device memory the engine holds (device_memory_use), so
// that server/ never names an engine type or a Vulkan object. Call from one thread (the daemon's loader);
// the engine it returns is then safe from any thread, as engine.h says.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/engine/batch_tokens.h"
#include "runner/engine/engine.h"

namespace kvtrie {
class GgufFile;
class KvEventSink;
class Tokenizer;
}  // namespace kvtrie

namespace kvtrie::engine {

struct EngineOptions {
  bool cpu_reference = false;      // the CPU float32 ReferenceEngine (tiny models, tests)
  std::optional<uint32_t> device;  // Vulkan device index; unset: discrete > integrated > CPU
  uint32_t n_ctx = 0;              // tokens per sequence; 0: the model's training context (capped)
  uint32_t parallel = 4;           // sequences decoded together
  uint32_t queue_capacity = 64;    // requests waiting for a slot
  uint32_t batch_tokens = kDefaultBatchTokens;  // tokens of one forward pass at most (GPU engine)
  // The GPU engine's (GpuEngineConfig, runner/engine/gpu_engine.h, says what each means); the CPU reference
  // engine has no KV tiers and ignores them.
  uint64_t kv_device_bytes = 0;
  uint64_t kv_host_bytes = 0;
  std::filesystem::path kv_disk_dir;
  uint64_t kv_disk_bytes = 0;
  bool kv_disk_overlap = true;  // GpuEngineConfig::kv_disk_overlap
  bool deterministic = false;
  double tenant_kv_share = 1.0;
  KvEventSink* kv_events = nullptr;  // must outlive the engine
};

// Builds the engine; throws InputError or kvtrie::Error when the model cannot be served (no device, a
// model the engine cannot run, KV tiers that do not fit). The GgufFile and the Tokenizer must outlive it.
std::unique_ptr<Engine> make_engine(const EngineOptions& options, const GgufFile& file,
                                    const Tokenizer& tokenizer);

// The device memory an engine holds, for the load log lines; nullopt for the CPU reference engine.
struct DeviceMemoryUse {
  std::string device_name;
  std::string pci_bus_id;          // "" when the driver does not tell
  uint64_t device_local_free = 0;  // when the device was opened
  uint64_t weights = 0;
  uint64_t kv_device = 0;
  uint64_t kv_host = 0;
  uint64_t compute = 0;  // activations
};
std::optional<DeviceMemoryUse> device_memory_use(const Engine& engine);

// One "  VulkanN: NAME (TOTAL MiB, FREE MiB free)" line per Vulkan device; empty when there is none, or when
// Vulkan cannot enumerate them (logged as a warning). Creates and destroys a Vulkan instance.
std::vector<std::string> list_devices();

}  // namespace kvtrie::engine
