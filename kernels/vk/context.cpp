#include "kernels/vk/context.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvtrie::vk {
namespace {

Instance make_instance(const ContextOptions& options) {
  return Instance(InstanceOptions{options.validation});
}

PhysicalDeviceInfo choose(const Instance& instance, const ContextOptions& options) {
  const std::vector<PhysicalDeviceInfo> devices = list_physical_devices(instance);
  std::optional<PhysicalDeviceInfo> chosen = select_physical_device(devices, options.device_index);
  if (!chosen) {
    if (options.device_index)
      throw Error("Vulkan device index " + std::to_string(*options.device_index) + " out of range (" +
                  std::to_string(devices.size()) + " devices)");
    throw Error("no Vulkan device found");
  }
  return *chosen;
}

}  // namespace

Context::Context(ContextOptions options)
    : instance_(make_instance(options)),
      device_(instance_, choose(instance_, options), options.pipeline_statistics),
      pipelines_(device_, pipeline_cache_dir()) {
  const PhysicalDeviceInfo& info = device_.info();
  spdlog::debug("vulkan: using {} ({}, Vulkan {}.{}), subgroup {}, max storage range {} MiB, queue family {}",
                info.name, device_kind_name(info.kind), VK_API_VERSION_MAJOR(info.api_version),
                VK_API_VERSION_MINOR(info.api_version), device_.subgroup_size(),
                device_.max_storage_buffer_range() >> 20, device_.compute_family());
  // Which shader paths this run can take: the first thing to read when a device is slower than expected.
  spdlog::info("vulkan: {} fast paths: {}", info.name, device_.describe_enabled_fast_paths());
}

Context::~Context() {
  // Everything still running must finish before its resources (retired or pipelines) go away.
  if (device_.handle() != VK_NULL_HANDLE) vkDeviceWaitIdle(device_.handle());
  in_flight_.clear();
  retired_.clear();
}

uint64_t Context::begin_submission() {
  const uint64_t serial = next_serial_++;
  in_flight_.insert(serial);
  return serial;
}

void Context::end_submission(uint64_t serial) {
  in_flight_.erase(serial);
  drain();
}

void Context::drain() {
  const uint64_t oldest = in_flight_.empty() ? UINT64_MAX : *in_flight_.begin();
  std::erase_if(retired_, [&](const Entry& e) { return e.last_serial < oldest; });
}

}  // namespace kvtrie::vk
