// Contract: DescriptorAllocator owns a growing chain of descriptor pools (storage buffers only) and hands
// out descriptor sets that live until reset() or destruction. A CommandRecorder owns one, so a recorded
// command buffer keeps its sets for as long as it may be replayed. Not thread-safe; the Device must outlive
// it.
#pragma once
#include <vulkan/vulkan.h>

#include <vector>

#include "kernels/vk/handle.h"

namespace kvtrie::vk {

class Device;

class DescriptorAllocator {
 public:
  explicit DescriptorAllocator(const Device& device);

  VkDescriptorSet allocate(VkDescriptorSetLayout layout);
  // Frees every set handed out (the caller guarantees none is in use by the device).
  void reset();

 private:
  void add_pool();

  const Device* device_;
  std::vector<DescriptorPoolHandle> pools_;
  size_t current_ = 0;
};

}  // namespace kvtrie::vk
