#include "runner/engine/make_engine.h"

#include <spdlog/spdlog.h>

#include "kernels/vk/context.h"
#include "kernels/vk/instance.h"
#include "kernels/vk/physical_device.h"
#include "runner/engine/gpu_engine.h"
#include "runner/engine/reference_engine.h"

namespace kvtrie::engine {

std::unique_ptr<Engine> make_engine(const EngineOptions& options, const GgufFile& file,
                                    const Tokenizer& tokenizer) {
  if (options.cpu_reference) {
    ReferenceEngineConfig config;
    config.n_ctx = options.n_ctx;
    config.parallel = options.parallel;
    config.queue_capacity = options.queue_capacity;
    return std::make_unique<ReferenceEngine>(file, tokenizer, config);
  }
  auto context = std::make_unique<vk::Context>(vk::ContextOptions{options.device, false});
  GpuEngineConfig config;
  config.n_ctx = options.n_ctx;
  config.parallel = options.parallel;
  config.queue_capacity = options.queue_capacity;
  config.max_batch_tokens = options.batch_tokens;
  config.kv_device_bytes = options.kv_device_bytes;
  config.kv_host_bytes = options.kv_host_bytes;
  config.kv_disk_dir = options.kv_disk_dir;
  config.kv_disk_bytes = options.kv_disk_bytes;
  config.kv_disk_overlap = options.kv_disk_overlap;
  config.deterministic = options.deterministic;
  config.tenant_kv_share = options.tenant_kv_share;
  config.kv_events = options.kv_events;
  return std::make_unique<GpuEngine>(std::move(context), file, tokenizer, config);
}

std::optional<DeviceMemoryUse> device_memory_use(const Engine& engine) {
  const auto* gpu = dynamic_cast<const GpuEngine*>(&engine);
  if (gpu == nullptr) return std::nullopt;
  const vk::PhysicalDeviceInfo& info = gpu->context().device().info();
  const GpuEngine::MemoryUse use = gpu->memory_use();
  return DeviceMemoryUse{info.name,   info.pci_bus_id, info.device_local_free, use.weights, use.kv_device,
                         use.kv_host, use.compute};
}

std::vector<std::string> list_devices() {
  std::vector<std::string> lines;
  try {
    vk::Instance instance;
    for (const auto& info : vk::list_physical_devices(instance))
      lines.push_back(vk::describe_device_line(info));
  } catch (const std::exception& e) {
    spdlog::warn("cannot enumerate Vulkan devices: {}", e.what());
  }
  return lines;
}

}  // namespace kvtrie::engine
