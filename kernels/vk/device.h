// Contract: Device owns the VkDevice created on one physical device, with one compute queue (of the family
// pick_compute_family names) and, when the device has a separate transfer-only queue family, one transfer
// queue. It enables 16-bit and 8-bit storage, shaderFloat16, shaderInt8 and shaderInt16 when the device
// offers them (see the `has_*` flags), and VK_NV_cooperative_matrix with the Vulkan memory model when the
// device has both (coopmat_enabled()). The faster paths of fast_paths.h (integer dot product, KHR cooperative
// matrices, NV cooperative matrix 2, subgroup size control) are enabled where the device offers them AND this
// build embeds their shaders (kernels/shader_features.h): each *_enabled() answer is true only then, so an op
// may take a path on its word alone. VK_KHR_pipeline_executable_properties only when the creator asks (the
// tuning tools). The Instance it was created from must outlive it. Queue submission is not thread-safe: one
// thread (the engine's owner thread) submits.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kernels/vk/fast_paths.h"
#include "kernels/vk/physical_device.h"

namespace kvtrie::vk {

// The queue family the work goes to: the first with compute and no graphics where there is one (an NVIDIA
// card's async compute queues: on an H200 one sequence's decode step 1-2.6% faster, 32 sequences' 38%,
// docs/BENCHMARKS.md session 32), else the first with compute; with `choice` "first" (the
// KVTRIE_QUEUE_FAMILY variable, to measure the difference) always the first with compute. nullopt: none.
std::optional<uint32_t> pick_compute_family(std::span<const VkQueueFamilyProperties> families,
                                            const char* choice);

class Device {
 public:
  // pipeline_statistics: also enable VK_KHR_pipeline_executable_properties where offered (the tuning tools';
  // off for the engine, so its drivers compile exactly as without it).
  Device(const Instance& instance, const PhysicalDeviceInfo& physical, bool pipeline_statistics = false);
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
  // GL_EXT_integer_dot_product shaders may run (shaderIntegerDotProduct). Whether packed 4x8-bit dot
  // products are fast rather than emulated: info().fast.int_dot_4x8_signed_accelerated and its siblings.
  bool int_dot_enabled() const { return int_dot_enabled_; }
  // GL_KHR_cooperative_matrix shaders may run; which multiplies: khr_coopmat_supports().
  bool khr_coopmat_enabled() const { return khr_coopmat_enabled_; }
  // Whether this KHR cooperative-matrix multiply (sizes, component types, saturation, scope) is one the
  // device lists, with the shader features its component types need (f16: shaderFloat16, 8-bit:
  // shaderInt8). False whenever khr_coopmat_enabled() is.
  bool khr_coopmat_supports(const CoopMatShape& shape) const;
  // GL_NV_cooperative_matrix2 shaders (SPIR-V 1.6, so a Vulkan 1.3 device) may run, with every feature of
  // the extension (NvCoopMat2Features::all()) and bufferDeviceAddress (decode functions take buffer
  // references); flexible shapes in info().fast.nv_coopmat2_flexible_shapes.
  bool nv_coopmat2_enabled() const { return nv_coopmat2_enabled_; }
  // subgroupSizeControl (and computeFullSubgroups where offered) is enabled; sizes in info().fast.
  bool subgroup_size_control_enabled() const { return subgroup_size_control_enabled_; }
  // VK_KHR_pipeline_executable_properties is enabled (asked for and offered): pipeline_statistics.h can read
  // compiled shaders' statistics.
  bool pipeline_statistics_enabled() const { return pipeline_statistics_enabled_; }
  // The enabled fast paths for logs, e.g. "fp16, int-dot (4x8 accelerated), khr-coopmat (12 shapes)";
  // a path the device offers but this build's shaders lack is named with "(no shaders)".
  std::string describe_enabled_fast_paths() const;

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
  bool int_dot_enabled_ = false;
  bool khr_coopmat_enabled_ = false;
  bool nv_coopmat2_enabled_ = false;
  bool subgroup_size_control_enabled_ = false;
  bool pipeline_statistics_enabled_ = false;
};

}  // namespace kvtrie::vk
