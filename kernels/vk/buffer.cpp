#include "kernels/vk/buffer.h"

#include <string>
#include <utility>

#include "kernels/vk/device.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

BufferView BufferView::sub(uint64_t sub_offset, uint64_t size) const {
  KVTRIE_CHECK(sub_offset <= range && size <= range - sub_offset,
               "sub-view [" + std::to_string(sub_offset) + ", +" + std::to_string(size) +
                   ") outside a view of " + std::to_string(range) + " bytes");
  return {buffer, offset + sub_offset, size};
}

Buffer::Buffer(const Device& device, uint64_t size, MemoryKind kind) : device_(device.handle()), size_(size) {
  KVTRIE_CHECK(size > 0, "a buffer of zero bytes");
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  // With a separate transfer queue, buffers are shared by both families (no ownership transfers needed).
  const uint32_t families[] = {device.compute_family(), device.transfer_family().value_or(0)};
  if (device.transfer_family()) {
    info.sharingMode = VK_SHARING_MODE_CONCURRENT;
    info.queueFamilyIndexCount = 2;
    info.pQueueFamilyIndices = families;
  }
  VK_CHECK(vkCreateBuffer(device_, &info, nullptr, &buffer_));
  try {
    VkMemoryRequirements requirements;
    vkGetBufferMemoryRequirements(device_, buffer_, &requirements);
    memory_ = Allocation(device, requirements, kind);
    VK_CHECK(vkBindBufferMemory(device_, buffer_, memory_.handle(), 0));
  } catch (...) {
    destroy();
    throw;
  }
}

std::optional<Buffer> Buffer::try_create(const Device& device, uint64_t size, MemoryKind kind) {
  try {
    return Buffer(device, size, kind);
  } catch (const VulkanError& e) {
    if (e.result() == VK_ERROR_OUT_OF_DEVICE_MEMORY || e.result() == VK_ERROR_OUT_OF_HOST_MEMORY)
      return std::nullopt;
    throw;
  }
}

Buffer::~Buffer() {
  destroy();
}

Buffer::Buffer(Buffer&& other) noexcept
    : device_(std::exchange(other.device_, VK_NULL_HANDLE)),
      buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)),
      size_(std::exchange(other.size_, 0)),
      memory_(std::move(other.memory_)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    destroy();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    memory_ = std::move(other.memory_);
  }
  return *this;
}

void Buffer::destroy() noexcept {
  if (buffer_ != VK_NULL_HANDLE) {
    vkDestroyBuffer(device_, buffer_, nullptr);
    buffer_ = VK_NULL_HANDLE;
  }
  memory_ = Allocation();  // the memory goes after the buffer bound to it
  size_ = 0;
}

}  // namespace kvtrie::vk
