#include "kernels/vk/device.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/shader_features.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {

// Puts `feature` at the front of the VkDeviceCreateInfo feature chain.
template <typename Feature>
void link(VkPhysicalDeviceFeatures2& features, Feature& feature) {
  feature.pNext = features.pNext;
  features.pNext = &feature;
}

bool has_type(const CoopMatShape& s, VkComponentTypeKHR a, VkComponentTypeKHR b) {
  for (VkComponentTypeKHR t : {s.a, s.b, s.c, s.result})
    if (t == a || t == b) return true;
  return false;
}

}  // namespace

std::optional<uint32_t> pick_compute_family(std::span<const VkQueueFamilyProperties> families,
                                            const char* choice) {
  std::optional<uint32_t> first, compute_only;
  for (uint32_t i = 0; i < families.size(); ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if (!(flags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0) continue;
    if (!first) first = i;
    if (!(flags & VK_QUEUE_GRAPHICS_BIT) && !compute_only) compute_only = i;
  }
  const bool want_first = choice != nullptr && std::string_view(choice) == "first";
  return compute_only && !want_first ? compute_only : first;
}

Device::Device(const Instance& /*instance*/, const PhysicalDeviceInfo& physical, bool pipeline_statistics)
    : info_(physical) {
  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &family_count, families.data());

  const std::optional<uint32_t> compute = pick_compute_family(families, std::getenv("KVTRIE_QUEUE_FAMILY"));
  if (!compute) throw Error("Vulkan device " + info_.name + " has no compute queue");
  compute_family_ = *compute;
  for (uint32_t i = 0; i < family_count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    // A family with transfer but neither graphics nor compute is the dedicated copy engine.
    if ((flags & VK_QUEUE_TRANSFER_BIT) && !(flags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) &&
        !transfer_family_)
      transfer_family_ = i;
  }

  const float priority = 1.0f;
  std::vector<VkDeviceQueueCreateInfo> queues;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = compute_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  queues.push_back(queue);
  if (transfer_family_) {
    queue.queueFamilyIndex = *transfer_family_;
    queues.push_back(queue);
  }

  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.storageBuffer8BitAccess = info_.storage_buffer_8bit;
  f12.shaderFloat16 = info_.shader_float16;
  f12.shaderInt8 = info_.shader_int8;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = info_.storage_buffer_16bit;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f11;
  features.features.shaderInt16 = info_.shader_int16;

  std::vector<const char*> extensions;
  if (info_.has_memory_budget) extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);

  // VK_NV_cooperative_matrix for the matmul_coopmat shaders, which also use the Vulkan memory
  // model; enabled only when the device has both.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{};
  coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  if (kShadersHaveNvCoopmat && info_.nv_cooperative_matrix && info_.nv_cooperative_matrix_feature &&
      info_.vulkan_memory_model && info_.shader_float16) {
    coop.cooperativeMatrix = VK_TRUE;
    link(features, coop);
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    coopmat_enabled_ = true;
  }

  // The fast paths of fast_paths.h, where the device offers them and this build embeds their shaders. Only
  // the individual feature structs are chained (never VkPhysicalDeviceVulkan13Features beside them), and a
  // promoted extension is named too where the device lists it: a Vulkan 1.2 device needs it.
  const FastPathSupport& fast = info_.fast;
  VkPhysicalDeviceShaderIntegerDotProductFeatures int_dot{};
  int_dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  if (kShadersHaveIntDot && fast.int_dot) {
    int_dot.shaderIntegerDotProduct = VK_TRUE;
    link(features, int_dot);
    if (fast.int_dot_extension) extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    int_dot_enabled_ = true;
  }
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control{};
  size_control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  if (fast.subgroup_size_control) {
    size_control.subgroupSizeControl = VK_TRUE;
    size_control.computeFullSubgroups = fast.compute_full_subgroups ? VK_TRUE : VK_FALSE;
    link(features, size_control);
    if (fast.subgroup_size_control_extension)
      extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    subgroup_size_control_enabled_ = true;
  }
  // KHR cooperative-matrix shaders use the Vulkan memory model (glslang emits it for them).
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR khr_coop{};
  khr_coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
  if (kShadersHaveKhrCoopmat && fast.khr_coopmat && info_.vulkan_memory_model) {
    khr_coop.cooperativeMatrix = VK_TRUE;
    link(features, khr_coop);
    extensions.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    khr_coopmat_enabled_ = true;
  }
  // VK_NV_cooperative_matrix2 extends the KHR extension; its shaders are SPIR-V 1.6 (Vulkan 1.3).
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV coop2{};
  coop2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
  // Its decode functions take a buffer reference (GL_EXT_buffer_reference), hence bufferDeviceAddress.
  if (kShadersHaveNvCoopmat2 && khr_coopmat_enabled_ && fast.nv_coopmat2 && fast.nv_coopmat2_features.all() &&
      info_.usable_api_version >= VK_API_VERSION_1_3 && info_.buffer_device_address) {
    coop2.cooperativeMatrixWorkgroupScope = VK_TRUE;
    coop2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
    coop2.cooperativeMatrixReductions = VK_TRUE;
    coop2.cooperativeMatrixConversions = VK_TRUE;
    coop2.cooperativeMatrixPerElementOperations = VK_TRUE;
    coop2.cooperativeMatrixTensorAddressing = VK_TRUE;
    coop2.cooperativeMatrixBlockLoads = VK_TRUE;
    link(features, coop2);
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
    f12.bufferDeviceAddress = VK_TRUE;
    nv_coopmat2_enabled_ = true;
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable{};
  executable.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  if (pipeline_statistics && info_.pipeline_executable_info) {
    executable.pipelineExecutableInfo = VK_TRUE;
    link(features, executable);
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    pipeline_statistics_enabled_ = true;
  }
  if (coopmat_enabled_ || khr_coopmat_enabled_) {
    f12.vulkanMemoryModel = VK_TRUE;
    f12.vulkanMemoryModelDeviceScope = info_.vulkan_memory_model_device_scope ? VK_TRUE : VK_FALSE;
  }

  VkDeviceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create.pNext = &features;
  create.queueCreateInfoCount = static_cast<uint32_t>(queues.size());
  create.pQueueCreateInfos = queues.data();
  create.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
  VK_CHECK(vkCreateDevice(info_.handle, &create, nullptr, &device_));
  vkGetDeviceQueue(device_, compute_family_, 0, &compute_queue_);
  if (transfer_family_) vkGetDeviceQueue(device_, *transfer_family_, 0, &transfer_queue_);
}

Device::~Device() {
  destroy();
}

Device::Device(Device&& other) noexcept
    : info_(std::move(other.info_)),
      device_(std::exchange(other.device_, VK_NULL_HANDLE)),
      compute_queue_(std::exchange(other.compute_queue_, VK_NULL_HANDLE)),
      compute_family_(other.compute_family_),
      transfer_family_(other.transfer_family_),
      transfer_queue_(std::exchange(other.transfer_queue_, VK_NULL_HANDLE)),
      coopmat_enabled_(other.coopmat_enabled_),
      int_dot_enabled_(other.int_dot_enabled_),
      khr_coopmat_enabled_(other.khr_coopmat_enabled_),
      nv_coopmat2_enabled_(other.nv_coopmat2_enabled_),
      subgroup_size_control_enabled_(other.subgroup_size_control_enabled_),
      pipeline_statistics_enabled_(other.pipeline_statistics_enabled_) {}

Device& Device::operator=(Device&& other) noexcept {
  if (this != &other) {
    destroy();
    info_ = std::move(other.info_);
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    compute_queue_ = std::exchange(other.compute_queue_, VK_NULL_HANDLE);
    compute_family_ = other.compute_family_;
    transfer_family_ = other.transfer_family_;
    transfer_queue_ = std::exchange(other.transfer_queue_, VK_NULL_HANDLE);
    coopmat_enabled_ = other.coopmat_enabled_;
    int_dot_enabled_ = other.int_dot_enabled_;
    khr_coopmat_enabled_ = other.khr_coopmat_enabled_;
    nv_coopmat2_enabled_ = other.nv_coopmat2_enabled_;
    subgroup_size_control_enabled_ = other.subgroup_size_control_enabled_;
    pipeline_statistics_enabled_ = other.pipeline_statistics_enabled_;
  }
  return *this;
}

bool Device::khr_coopmat_supports(const CoopMatShape& shape) const {
  if (!khr_coopmat_enabled_) return false;
  if (has_type(shape, VK_COMPONENT_TYPE_FLOAT16_KHR, VK_COMPONENT_TYPE_FLOAT16_KHR) && !info_.shader_float16)
    return false;
  if (has_type(shape, VK_COMPONENT_TYPE_SINT8_KHR, VK_COMPONENT_TYPE_UINT8_KHR) && !info_.shader_int8)
    return false;
  return std::find(info_.fast.khr_coopmat_shapes.begin(), info_.fast.khr_coopmat_shapes.end(), shape) !=
         info_.fast.khr_coopmat_shapes.end();
}

std::string Device::describe_enabled_fast_paths() const {
  const FastPathSupport& f = info_.fast;
  std::string out;
  auto add = [&](bool enabled, bool offered, const std::string& name) {
    if (!enabled && !offered) return;
    if (!out.empty()) out += ", ";
    out += name;
    if (!enabled) out += " (no shaders)";  // offered, but this build's glslc could not compile them
  };
  add(info_.shader_float16, false, "fp16");
  add(has_int8(), false, "int8");
  add(int_dot_enabled_, f.int_dot,
      f.int_dot_4x8_signed_accelerated ? "int-dot (4x8 accelerated)" : "int-dot (emulated)");
  add(coopmat_enabled_, false, "nv-coopmat");
  add(khr_coopmat_enabled_, f.khr_coopmat && !kShadersHaveKhrCoopmat,
      "khr-coopmat (" + std::to_string(f.khr_coopmat_shapes.size()) + " shapes)");
  add(nv_coopmat2_enabled_, f.nv_coopmat2 && f.nv_coopmat2_features.all() && !kShadersHaveNvCoopmat2,
      "nv-coopmat2");
  add(subgroup_size_control_enabled_, false,
      "subgroup-size " + std::to_string(f.min_subgroup_size) + ".." + std::to_string(f.max_subgroup_size));
  return out.empty() ? "none" : out;
}

void Device::wait_idle() const {
  VK_CHECK(vkDeviceWaitIdle(device_));
}

void Device::destroy() noexcept {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);  // nothing may still run on resources about to go away
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
}

}  // namespace kvtrie::vk
