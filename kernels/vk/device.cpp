#include "kernels/vk/device.h"

#include <utility>
#include <vector>

#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

Device::Device(const Instance& /*instance*/, const PhysicalDeviceInfo& physical) : info_(physical) {
  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &family_count, families.data());

  std::optional<uint32_t> compute;
  for (uint32_t i = 0; i < family_count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if ((flags & VK_QUEUE_COMPUTE_BIT) && !compute) compute = i;
    // A family with transfer but neither graphics nor compute is the dedicated copy engine.
    if ((flags & VK_QUEUE_TRANSFER_BIT) && !(flags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) &&
        !transfer_family_)
      transfer_family_ = i;
  }
  if (!compute) throw Error("Vulkan device " + info_.name + " has no compute queue");
  compute_family_ = *compute;

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

  // VK_NV_cooperative_matrix for the matmul_coopmat shaders (owner: mm), which also use the Vulkan memory
  // model; enabled only when the device has both.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{};
  coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  if (info_.nv_cooperative_matrix && info_.nv_cooperative_matrix_feature && info_.vulkan_memory_model &&
      info_.shader_float16) {
    coop.cooperativeMatrix = VK_TRUE;
    coop.pNext = features.pNext;
    features.pNext = &coop;
    f12.vulkanMemoryModel = VK_TRUE;
    f12.vulkanMemoryModelDeviceScope = info_.vulkan_memory_model_device_scope ? VK_TRUE : VK_FALSE;
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    coopmat_enabled_ = true;
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
      coopmat_enabled_(other.coopmat_enabled_) {}

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
  }
  return *this;
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
