#include "kernels/vk/physical_device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "kernels/vk/instance.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {

DeviceKind to_kind(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceKind::Discrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceKind::Integrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceKind::Virtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceKind::Cpu;
    default:
      return DeviceKind::Other;
  }
}

int preference(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Discrete:
      return 0;
    case DeviceKind::Integrated:
      return 1;
    case DeviceKind::Virtual:
      return 2;
    case DeviceKind::Cpu:
      return 3;
    case DeviceKind::Other:
      break;
  }
  return 4;
}

bool has_extension(const std::vector<VkExtensionProperties>& extensions, std::string_view name) {
  for (const VkExtensionProperties& e : extensions)
    if (name == e.extensionName) return true;
  return false;
}

PhysicalDeviceInfo describe(VkInstance instance, VkPhysicalDevice device, uint32_t index) {
  PhysicalDeviceInfo info;
  info.handle = device;
  info.index = index;

  uint32_t ext_count = 0;
  VK_CHECK(vkEnumerateDeviceExtensionProperties(device, nullptr, &ext_count, nullptr));
  std::vector<VkExtensionProperties> extensions(ext_count);
  VK_CHECK(vkEnumerateDeviceExtensionProperties(device, nullptr, &ext_count, extensions.data()));
  info.has_memory_budget = has_extension(extensions, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  info.nv_cooperative_matrix = has_extension(extensions, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);

  const bool has_pci = has_extension(extensions, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci{};
  pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  if (has_pci) subgroup.pNext = &pci;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(device, &props);
  const VkPhysicalDeviceLimits& limits = props.properties.limits;
  info.name = props.properties.deviceName;
  info.kind = to_kind(props.properties.deviceType);
  info.vendor_id = props.properties.vendorID;
  info.device_id = props.properties.deviceID;
  info.api_version = props.properties.apiVersion;
  info.usable_api_version = std::min(info.api_version, kInstanceApiVersion);
  info.subgroup_size = subgroup.subgroupSize;
  if (has_pci) {
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", pci.pciDomain, pci.pciBus, pci.pciDevice,
                  pci.pciFunction);
    info.pci_bus_id = bus;
  }
  info.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info.subgroup_vote = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.max_workgroup_size_x = limits.maxComputeWorkGroupSize[0];
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  info.max_shared_memory = limits.maxComputeSharedMemorySize;
  info.max_push_constants = limits.maxPushConstantsSize;
  info.min_storage_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
  info.timestamp_period_ns = limits.timestampPeriod;
  info.timestamps = limits.timestampComputeAndGraphics == VK_TRUE;

  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{};
  coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  if (info.nv_cooperative_matrix) f12.pNext = &coop;  // chained only where the extension exists
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable{};
  executable.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  if (has_extension(extensions, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
    executable.pNext = f12.pNext;
    f12.pNext = &executable;
  }
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f11;
  vkGetPhysicalDeviceFeatures2(device, &features);
  info.nv_cooperative_matrix_feature = coop.cooperativeMatrix == VK_TRUE;
  info.vulkan_memory_model = f12.vulkanMemoryModel == VK_TRUE;
  info.vulkan_memory_model_device_scope = f12.vulkanMemoryModelDeviceScope == VK_TRUE;
  info.storage_buffer_16bit = f11.storageBuffer16BitAccess == VK_TRUE;
  info.storage_buffer_8bit = f12.storageBuffer8BitAccess == VK_TRUE;
  info.shader_float16 = f12.shaderFloat16 == VK_TRUE;
  info.shader_int8 = f12.shaderInt8 == VK_TRUE;
  info.shader_int16 = features.features.shaderInt16 == VK_TRUE;
  info.buffer_device_address = f12.bufferDeviceAddress == VK_TRUE;
  info.pipeline_executable_info = executable.pipelineExecutableInfo == VK_TRUE;
  info.fast = query_fast_paths(instance, device, info.usable_api_version, extensions);

  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  VkPhysicalDeviceMemoryProperties2 memory{};
  memory.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  if (info.has_memory_budget) memory.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(device, &memory);
  const VkPhysicalDeviceMemoryProperties& mp = memory.memoryProperties;
  for (uint32_t h = 0; h < mp.memoryHeapCount; ++h) {
    if (!(mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    if (mp.memoryHeaps[h].size <= info.device_local_bytes) continue;
    info.device_local_bytes = mp.memoryHeaps[h].size;
    info.device_local_free = info.device_local_bytes;
    if (info.has_memory_budget) {
      const uint64_t used = budget.heapUsage[h];
      const uint64_t cap = budget.heapBudget[h];
      info.device_local_free = cap > used ? cap - used : 0;
    }
  }
  return info;
}

}  // namespace

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Discrete:
      return "discrete";
    case DeviceKind::Integrated:
      return "integrated";
    case DeviceKind::Virtual:
      return "virtual";
    case DeviceKind::Cpu:
      return "cpu";
    case DeviceKind::Other:
      break;
  }
  return "other";
}

std::vector<PhysicalDeviceInfo> list_physical_devices(const Instance& instance) {
  uint32_t count = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(instance.handle(), &count, nullptr));
  std::vector<VkPhysicalDevice> handles(count);
  VK_CHECK(vkEnumeratePhysicalDevices(instance.handle(), &count, handles.data()));
  std::vector<PhysicalDeviceInfo> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) out.push_back(describe(instance.handle(), handles[i], i));
  return out;
}

std::optional<PhysicalDeviceInfo> select_physical_device(const std::vector<PhysicalDeviceInfo>& devices,
                                                         std::optional<uint32_t> index) {
  if (index) {
    if (*index >= devices.size()) return std::nullopt;
    return devices[*index];
  }
  const PhysicalDeviceInfo* best = nullptr;
  for (const PhysicalDeviceInfo& d : devices)
    if (best == nullptr || preference(d.kind) < preference(best->kind)) best = &d;
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::string describe_device_line(const PhysicalDeviceInfo& info) {
  constexpr uint64_t kMiB = 1024 * 1024;
  return "  Vulkan" + std::to_string(info.index) + ": " + info.name + " (" +
         std::to_string(info.device_local_bytes / kMiB) + " MiB, " +
         std::to_string(info.device_local_free / kMiB) + " MiB free)";
}

std::string describe_fast_paths(const PhysicalDeviceInfo& info) {
  const FastPathSupport& f = info.fast;
  std::vector<std::string> parts;
  if (info.shader_float16) parts.push_back("fp16");
  if (info.shader_int8 && info.storage_buffer_8bit) parts.push_back("int8");
  if (f.int_dot)
    parts.push_back(f.int_dot_4x8_signed_accelerated ? "int-dot (4x8 accelerated)" : "int-dot (emulated)");
  if (info.nv_cooperative_matrix_feature) parts.push_back("nv-coopmat");
  if (f.khr_coopmat)
    parts.push_back("khr-coopmat (" + std::to_string(f.khr_coopmat_shapes.size()) + " shapes)");
  if (f.nv_coopmat2) parts.push_back(f.nv_coopmat2_features.all() ? "nv-coopmat2" : "nv-coopmat2 (partial)");
  if (f.subgroup_size_control)
    parts.push_back("subgroup-size " + std::to_string(f.min_subgroup_size) + ".." +
                    std::to_string(f.max_subgroup_size));
  if (parts.empty()) return "none";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += ", " + parts[i];
  return out;
}

}  // namespace kvtrie::vk
