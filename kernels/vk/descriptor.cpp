#include "kernels/vk/descriptor.h"

#include "kernels/vk/device.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {
// A pool serves this many sets of up to kBindingsPerSet bindings on average before the next one is added.
constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kBindingsPerSet = 8;
}  // namespace

DescriptorAllocator::DescriptorAllocator(const Device& device) : device_(&device) {}

void DescriptorAllocator::add_pool() {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBindingsPerSet};
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = kSetsPerPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool;
  VK_CHECK(vkCreateDescriptorPool(device_->handle(), &info, nullptr, &pool));
  pools_.emplace_back(device_->handle(), pool);
}

VkDescriptorSet DescriptorAllocator::allocate(VkDescriptorSetLayout layout) {
  for (;;) {
    if (current_ == pools_.size()) add_pool();
    VkDescriptorSetAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    info.descriptorPool = pools_[current_].get();
    info.descriptorSetCount = 1;
    info.pSetLayouts = &layout;
    VkDescriptorSet set;
    VkResult result = vkAllocateDescriptorSets(device_->handle(), &info, &set);
    if (result == VK_SUCCESS) return set;
    if (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL)
      throw_vk_error(result, "vkAllocateDescriptorSets");
    ++current_;  // this pool is full: move on to the next (created on demand)
  }
}

void DescriptorAllocator::reset() {
  for (const DescriptorPoolHandle& pool : pools_)
    VK_CHECK(vkResetDescriptorPool(device_->handle(), pool.get(), 0));
  current_ = 0;
}

}  // namespace kvtrie::vk
