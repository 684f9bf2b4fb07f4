#include "kernels/vk/memory.h"

#include <atomic>
#include <optional>
#include <utility>

#include "kernels/vk/device.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {

std::atomic<uint64_t> g_live_count{0};
std::atomic<uint64_t> g_live_bytes{0};
std::atomic<uint64_t> g_fail_countdown{0};

// Memory type choice: required flags must be present; among those, prefer the listed extras in order.
std::optional<uint32_t> pick_type(const VkPhysicalDeviceMemoryProperties& props, uint32_t allowed,
                                  VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  std::optional<uint32_t> fallback;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    if (!(allowed & (1u << i))) continue;
    const VkMemoryPropertyFlags flags = props.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (!fallback) fallback = i;
  }
  return fallback;
}

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::DeviceLocal:
      return "device-local";
    case MemoryKind::HostCached:
      return "host-cached";
    case MemoryKind::HostCoherent:
      return "host-coherent";
    case MemoryKind::HostWritten:
      return "host-written";
  }
  return "?";
}

uint64_t live_allocation_count() {
  return g_live_count.load();
}
uint64_t live_allocation_bytes() {
  return g_live_bytes.load();
}
void inject_allocation_failure(uint64_t n) {
  g_fail_countdown.store(n);
}

Allocation::Allocation(const Device& device, const VkMemoryRequirements& requirements, MemoryKind kind)
    : device_(device.handle()), size_(requirements.size), kind_(kind) {
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(device.physical(), &props);
  const VkMemoryPropertyFlags coherent =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  std::optional<uint32_t> type, fallback_type;
  switch (kind) {
    case MemoryKind::DeviceLocal:
      type = pick_type(props, requirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
      break;
    case MemoryKind::HostCached:
      type = pick_type(props, requirements.memoryTypeBits,
                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
      if (!type)  // some devices have no cached type: reads are slow there but still correct
        type = pick_type(props, requirements.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0);
      break;
    case MemoryKind::HostCoherent:
      type = pick_type(props, requirements.memoryTypeBits, coherent, 0);
      break;
    case MemoryKind::HostWritten:
      type = pick_type(props, requirements.memoryTypeBits, coherent, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
      fallback_type = pick_type(props, requirements.memoryTypeBits, coherent, 0);
      if (fallback_type == type) fallback_type.reset();
      break;
  }
  if (!type) throw Error(std::string("no Vulkan memory type for ") + memory_kind_name(kind) + " memory");

  // Failure injection: decrement the armed countdown; the allocation that takes it to zero fails.
  uint64_t armed = g_fail_countdown.load();
  while (armed != 0 && !g_fail_countdown.compare_exchange_weak(armed, armed - 1)) {
  }
  if (armed == 1) throw_vk_error(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory (injected failure)");

  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = requirements.size;
  info.memoryTypeIndex = *type;
  VkResult allocated = vkAllocateMemory(device_, &info, nullptr, &memory_);
  if (allocated == VK_ERROR_OUT_OF_DEVICE_MEMORY && fallback_type) {  // a small BAR heap, full
    type = fallback_type;
    info.memoryTypeIndex = *type;
    allocated = vkAllocateMemory(device_, &info, nullptr, &memory_);
  }
  if (allocated != VK_SUCCESS) throw_vk_error(allocated, "vkAllocateMemory");
  const VkMemoryPropertyFlags flags = props.memoryTypes[*type].propertyFlags;
  coherent_ = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  g_live_count.fetch_add(1);
  g_live_bytes.fetch_add(size_);
  // Device-local memory is never mapped, even where it is host-visible (lavapipe, resizable BAR), so that
  // every device gets the same staged upload path.
  if (kind != MemoryKind::DeviceLocal && (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
    VkResult result = vkMapMemory(device_, memory_, 0, VK_WHOLE_SIZE, 0, &mapped_);
    if (result != VK_SUCCESS) {
      destroy();
      throw_vk_error(result, "vkMapMemory");
    }
  }
}

Allocation::~Allocation() {
  destroy();
}

Allocation::Allocation(Allocation&& other) noexcept
    : device_(std::exchange(other.device_, VK_NULL_HANDLE)),
      memory_(std::exchange(other.memory_, VK_NULL_HANDLE)),
      size_(std::exchange(other.size_, 0)),
      kind_(other.kind_),
      mapped_(std::exchange(other.mapped_, nullptr)),
      coherent_(other.coherent_) {}

Allocation& Allocation::operator=(Allocation&& other) noexcept {
  if (this != &other) {
    destroy();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    kind_ = other.kind_;
    mapped_ = std::exchange(other.mapped_, nullptr);
    coherent_ = other.coherent_;
  }
  return *this;
}

namespace {
VkMappedMemoryRange whole_block(VkDeviceMemory memory) {
  VkMappedMemoryRange range{};
  range.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE;
  range.memory = memory;
  range.size = VK_WHOLE_SIZE;
  return range;
}
}  // namespace

void Allocation::flush() const {
  if (coherent_ || mapped_ == nullptr) return;
  const VkMappedMemoryRange range = whole_block(memory_);
  VK_CHECK(vkFlushMappedMemoryRanges(device_, 1, &range));
}

void Allocation::invalidate() const {
  if (coherent_ || mapped_ == nullptr) return;
  const VkMappedMemoryRange range = whole_block(memory_);
  VK_CHECK(vkInvalidateMappedMemoryRanges(device_, 1, &range));
}

void Allocation::destroy() noexcept {
  if (memory_ != VK_NULL_HANDLE) {
    if (mapped_ != nullptr) vkUnmapMemory(device_, memory_);
    vkFreeMemory(device_, memory_, nullptr);
    g_live_count.fetch_sub(1);
    g_live_bytes.fetch_sub(size_);
    memory_ = VK_NULL_HANDLE;
    mapped_ = nullptr;
  }
}

}  // namespace kvtrie::vk
