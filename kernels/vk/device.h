// Contract: Device owns the VkDevice created on one physical device, with one compute queue and, when the
// device has a separate transfer-only queue family, one transfer queue. It enables 16-bit and 8-bit storage,
// shaderFloat16, shaderInt8 and shaderInt16 when the device offers them (see the `has_*` flags), and
// VK_NV_cooperative_matrix with the Vulkan memory model when the device has both (coopmat_enabled()). The
// Instance it was created from must outlive it. Queue submission is not thread-safe: one thread (the engine's
// owner thread) submits.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>

#include "kernels/vk/physical_device.h"

namespace kvtrie::vk {

class Device {
 public:
  Device(const Instance& instance, const PhysicalDeviceInfo& physical);
  ~Device();
  Device(Device&& other) noexcept;
  Device& operator=(Device&& other) noexcept;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return info_.handle; }
  const PhysicalDeviceInfo& info() const { return info_; }

  VkQueue compute_queue() const { return compute_queue_; }
  uint32_t compute_family() const { return compute_family_; }
  // A queue of a transfer-only family, or nullopt when the device has none (copies then use compute).
  std::optional<uint32_t> transfer_family() const { return transfer_family_; }
  VkQueue transfer_queue() const { return transfer_queue_; }

  uint32_t subgroup_size() const { return info_.subgroup_size; }
  uint64_t max_storage_buffer_range() const { return info_.max_storage_buffer_range; }
  bool has_float16() const { return info_.shader_float16; }
  bool has_int8() const { return info_.shader_int8 && info_.storage_buffer_8bit; }
  bool has_16bit_storage() const { return info_.storage_buffer_16bit; }
  // VK_NV_cooperative_matrix is enabled (matmul's CoopMat path may run).
  bool coopmat_enabled() const { return coopmat_enabled_; }

  // Waits until the device is idle (teardown, tests).
  void wait_idle() const;

 private:
  void destroy() noexcept;

  PhysicalDeviceInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue compute_queue_ = VK_NULL_HANDLE;
  uint32_t compute_family_ = 0;
  std::optional<uint32_t> transfer_family_;
  VkQueue transfer_queue_ = VK_NULL_HANDLE;
  bool coopmat_enabled_ = false;
};

}  // namespace kvtrie::vk
