// Contract: Allocation owns one VkDeviceMemory block of one of four kinds, and keeps host-visible kinds
// persistently mapped. Every live allocation is counted process-wide (live_allocation_count()) so tests can
// assert that nothing leaked; inject_allocation_failure(n) makes the n-th next allocation fail as if the
// device were out of memory (failure-injection tests). The Device must outlive the Allocation.
// Create/destroy from the owner thread; counters are atomic.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>

namespace kvtrie::vk {

class Device;

enum class MemoryKind {
  DeviceLocal,   // weights, activations, the device KV page pool
  HostCached,    // host tier of the KV cache and read-backs: host-visible, host-cached (CPU reads are fast)
  HostCoherent,  // staging for uploads: host-visible, coherent (write-combined is fine)
  // Small inputs the host writes before each submission and shaders read many times (token ids, positions,
  // page tables): device-local and host-visible memory where the device has it (resizable BAR), so a
  // shader's read is not a round trip over PCIe; else, or when that heap is full, as HostCoherent.
  HostWritten,
};
const char* memory_kind_name(MemoryKind kind);

// Allocations alive now, over all devices of the process.
uint64_t live_allocation_count();
// Bytes in those allocations.
uint64_t live_allocation_bytes();
// The n-th allocation from now (1 = the next one) fails with VK_ERROR_OUT_OF_DEVICE_MEMORY; 0 disarms.
void inject_allocation_failure(uint64_t n);

class Allocation {
 public:
  Allocation() = default;
  // Throws kvtrie::Error when no memory type fits or the driver refuses (out of memory included).
  Allocation(const Device& device, const VkMemoryRequirements& requirements, MemoryKind kind);
  ~Allocation();
  Allocation(Allocation&& other) noexcept;
  Allocation& operator=(Allocation&& other) noexcept;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  VkDeviceMemory handle() const { return memory_; }
  uint64_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  // Host pointer to the start of the block (nullptr for DeviceLocal, even where it is host-visible).
  void* mapped() const { return mapped_; }
  bool coherent() const { return coherent_; }
  // Make host writes visible to the device / device writes visible to the host, for the whole block (a
  // whole-block range is always atom-aligned, and every caller wants the whole buffer); no-ops when coherent.
  void flush() const;
  void invalidate() const;

 private:
  void destroy() noexcept;

  VkDevice device_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  MemoryKind kind_ = MemoryKind::DeviceLocal;
  void* mapped_ = nullptr;
  bool coherent_ = false;
};

}  // namespace kvtrie::vk
