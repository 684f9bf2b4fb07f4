// Contract: listing and choosing Vulkan physical devices. PhysicalDeviceInfo is a plain snapshot (name,
// type, device-local heap size and free estimate, limits, optional features and extensions, the fast shader
// paths it offers) taken at enumeration time; it owns no handle that needs destroying (physical devices
// belong to the instance). The Instance passed in must outlive the VkPhysicalDevice handles returned. Call
// from the thread that owns the Instance.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/vk/fast_paths.h"

namespace kvtrie::vk {

class Instance;

enum class DeviceKind { Discrete, Integrated, Virtual, Cpu, Other };
const char* device_kind_name(DeviceKind kind);

struct PhysicalDeviceInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices order: what --device N selects
  std::string name;
  DeviceKind kind = DeviceKind::Other;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t api_version = 0;         // what the device reports
  uint32_t usable_api_version = 0;  // the smaller of that and the instance's (kInstanceApiVersion)
  std::string pci_bus_id;           // "0000:01:00.0" when VK_EXT_pci_bus_info is offered, else empty
  uint64_t device_local_bytes = 0;  // size of the largest device-local heap
  uint64_t device_local_free = 0;   // VK_EXT_memory_budget estimate when present, else the heap size
  bool has_memory_budget = false;
  // Limits and optional capabilities, read here so selection and Device creation agree.
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd etc. in compute shaders
  bool subgroup_vote = false;        // subgroupAll etc. in compute shaders
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_workgroup_size_x = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_shared_memory = 0;
  uint32_t max_push_constants = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  float timestamp_period_ns = 0;
  bool timestamps = false;  // timestampComputeAndGraphics
  bool storage_buffer_16bit = false;
  bool storage_buffer_8bit = false;
  bool shader_float16 = false;
  bool shader_int8 = false;
  bool shader_int16 = false;
  bool nv_cooperative_matrix = false;  // VK_NV_cooperative_matrix is offered (reported, not enabled here)
  // Feature bits the cooperative-matrix shaders need (false unless the extension is offered).
  bool nv_cooperative_matrix_feature = false;
  bool vulkan_memory_model = false;
  bool vulkan_memory_model_device_scope = false;
  bool buffer_device_address = false;
  // VK_KHR_pipeline_executable_properties with pipelineExecutableInfo: the driver's statistics of a compiled
  // shader (registers, ...), for the tuning tools (pipeline_statistics.h; offered, not enabled here).
  bool pipeline_executable_info = false;
  // Integer dot product, KHR and NV2 cooperative matrices, subgroup size control (offered, not enabled).
  FastPathSupport fast;
};

// Every physical device the instance sees, in enumeration order.
std::vector<PhysicalDeviceInfo> list_physical_devices(const Instance& instance);

// The preferred device: discrete > integrated > virtual > CPU > other, first in enumeration order on ties.
// With `index`, that device (nullopt when out of range). nullopt when there are no devices.
std::optional<PhysicalDeviceInfo> select_physical_device(const std::vector<PhysicalDeviceInfo>& devices,
                                                         std::optional<uint32_t> index = std::nullopt);

// One line as Ollama's device discovery parses it: "  Vulkan0: NAME (TOTAL MiB, FREE MiB free)".
std::string describe_device_line(const PhysicalDeviceInfo& info);

// What the device offers beyond the portable path, for logs and verbose listings: "fp16, int8, int-dot
// (4x8 accelerated), nv-coopmat, khr-coopmat (3 shapes), nv-coopmat2, subgroup-size 8..64" or "none".
std::string describe_fast_paths(const PhysicalDeviceInfo& info);

}  // namespace kvtrie::vk
