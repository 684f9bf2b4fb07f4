// Contract: Buffer owns one VkBuffer and the Allocation bound to it (usable as a storage buffer and as a
// copy source and destination). BufferView is the non-owning way to pass a byte range of a buffer to ops and
// copies: {buffer handle, offset, range}; it does not keep the Buffer alive, so the Buffer must outlive every
// recording that uses a view of it (or be handed to the Context's retire list). Host-visible kinds are
// persistently mapped (data()). Create/destroy on the owner thread; the Device must outlive the Buffer.
//
// Size limits: a buffer may be larger than the device's maxStorageBufferRange (lavapipe: 128 MiB), but one
// shader binding cannot: a BufferView bound to a shader must have range <= maxStorageBufferRange. Callers
// split large tensors (e.g. a weight matrix by rows) into several views/buffers of at most that range.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>

#include "kernels/vk/memory.h"

namespace kvtrie::vk {

class Device;

struct BufferView {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t range = 0;  // bytes

  bool empty() const { return buffer == VK_NULL_HANDLE || range == 0; }
  // The sub-range [offset, offset+size) of this view (bounds-checked; throws kvtrie::Error).
  BufferView sub(uint64_t sub_offset, uint64_t size) const;
};

class Buffer {
 public:
  Buffer() = default;
  // Throws kvtrie::Error on failure (out of device memory included).
  Buffer(const Device& device, uint64_t size, MemoryKind kind);
  // nullopt when the device is out of memory of that kind (an expected outcome for pools); other failures
  // still throw.
  static std::optional<Buffer> try_create(const Device& device, uint64_t size, MemoryKind kind);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  MemoryKind kind() const { return memory_.kind(); }
  bool valid() const { return buffer_ != VK_NULL_HANDLE; }

  BufferView view() const { return {buffer_, 0, size_}; }
  BufferView view(uint64_t offset, uint64_t range) const { return view().sub(offset, range); }

  // Host pointer (the host-visible kinds only; DeviceLocal is never mapped). After host writes call
  // flush(); before host reads of device-written data call invalidate() (both no-ops on coherent memory).
  void* data() const { return memory_.mapped(); }
  void flush() const { memory_.flush(); }
  void invalidate() const { memory_.invalidate(); }

 private:
  void destroy() noexcept;

  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  Allocation memory_;  // declared after buffer_ but destroyed explicitly after it in destroy()
};

}  // namespace kvtrie::vk
