// Contract: DeviceHandle<T, destroy> is the single move-only owner of one device-level Vulkan handle of type
// T (shader module, pipeline, layout, pool, fence, query pool...), destroyed with `destroy` on the VkDevice
// it came from. Copies are deleted; moves are noexcept and null the source; the destructor skips null
// handles. The VkDevice must outlive the handle. Not thread-safe (as the handle it wraps).
#pragma once
#include <vulkan/vulkan.h>

#include <utility>

namespace kvtrie::vk {

template <typename T, auto Destroy>
class DeviceHandle {
 public:
  DeviceHandle() = default;
  DeviceHandle(VkDevice device, T handle) : device_(device), handle_(handle) {}
  ~DeviceHandle() { reset(); }
  DeviceHandle(DeviceHandle&& other) noexcept
      : device_(std::exchange(other.device_, VK_NULL_HANDLE)),
        handle_(std::exchange(other.handle_, VK_NULL_HANDLE)) {}
  DeviceHandle& operator=(DeviceHandle&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = std::exchange(other.device_, VK_NULL_HANDLE);
      handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
    }
    return *this;
  }
  DeviceHandle(const DeviceHandle&) = delete;
  DeviceHandle& operator=(const DeviceHandle&) = delete;

  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != VK_NULL_HANDLE; }
  void reset() noexcept {
    if (handle_ != VK_NULL_HANDLE) Destroy(device_, handle_, nullptr);
    handle_ = VK_NULL_HANDLE;
  }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  T handle_ = VK_NULL_HANDLE;
};

using ShaderModuleHandle = DeviceHandle<VkShaderModule, &vkDestroyShaderModule>;
using DescriptorSetLayoutHandle = DeviceHandle<VkDescriptorSetLayout, &vkDestroyDescriptorSetLayout>;
using PipelineLayoutHandle = DeviceHandle<VkPipelineLayout, &vkDestroyPipelineLayout>;
using PipelineHandle = DeviceHandle<VkPipeline, &vkDestroyPipeline>;
using PipelineCacheHandle = DeviceHandle<VkPipelineCache, &vkDestroyPipelineCache>;
using DescriptorPoolHandle = DeviceHandle<VkDescriptorPool, &vkDestroyDescriptorPool>;
using CommandPoolHandle = DeviceHandle<VkCommandPool, &vkDestroyCommandPool>;
using FenceHandle = DeviceHandle<VkFence, &vkDestroyFence>;
using QueryPoolHandle = DeviceHandle<VkQueryPool, &vkDestroyQueryPool>;

}  // namespace kvtrie::vk
