// Contract: host->device and device->host copies outside the hot loop (weights, tests, read-backs).
//
// Uploader streams many uploads through one ring of host-coherent staging slots, allocated on first use
// and reused: the caller's bytes are copied into a slot (by several threads for large pieces) while the
// GPU copies the previous slots out on the transfer queue (the compute queue where there is none), one
// submission and fence per slot. Small uploads share a slot; large ones span several. upload() returns once
// the caller's bytes are copied (the source may be reused); the destination holds them after finish() (or
// the destructor). Owner thread only; the Context and every destination Buffer must outlive the Uploader's
// copies (finish() or destruction ends them).
//
// The free functions upload()/download() are blocking one-offs: host-visible buffers are copied through
// their mapping, device-local ones through a staging buffer, waited on before returning. The Buffer must be
// idle or only in use by work already waited for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/vk/buffer.h"

namespace kvtrie::vk {

class Context;
class CopyPool;

struct UploaderOptions {
  uint64_t slot_bytes = 16ull << 20;  // one staging slot (and the largest piece of one copy)
  uint32_t slots = 4;                 // the ring: how many copies may be in flight while the next is filled
  uint32_t copy_threads = 0;          // host threads copying a large piece (0: from the CPU count)
};

class Uploader {
 public:
  explicit Uploader(Context& context, UploaderOptions options = {});
  // Waits for the copies in flight (never throws; a failure is logged).
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Queues a copy of `data` to dst at dst_offset (a device-local or host-visible Buffer); throws
  // kvtrie::Error when it does not fit the buffer or the driver fails.
  void upload(const Buffer& dst, uint64_t dst_offset, std::span<const std::byte> data);
  // Submits what is staged and waits for every copy.
  void finish();

  uint64_t bytes() const { return bytes_; }              // uploaded so far
  uint32_t submissions() const { return submissions_; }  // one per filled slot
  uint32_t slots_allocated() const { return static_cast<uint32_t>(slots_.size()); }
  double copy_ms() const { return copy_ms_; }  // host time copying into slots
  double wait_ms() const { return wait_ms_; }  // host time waiting for slots' copies to complete

 private:
  struct Slot;
  Slot& current();
  void submit_current();
  void copy_in(std::byte* dst, const std::byte* src, uint64_t n);

  Context& context_;
  UploaderOptions options_;
  std::unique_ptr<CopyPool> pool_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t current_ = 0;
  uint64_t bytes_ = 0;
  uint32_t submissions_ = 0;
  double copy_ms_ = 0, wait_ms_ = 0;
};

void upload(Context& context, const Buffer& dst, uint64_t dst_offset, std::span<const std::byte> data);
void download(Context& context, const Buffer& src, uint64_t src_offset, std::span<std::byte> out);

template <typename T>
void upload(Context& context, const Buffer& dst, std::span<const T> data, uint64_t dst_offset = 0) {
  upload(context, dst, dst_offset, std::as_bytes(data));
}
template <typename T>
std::vector<T> download(Context& context, const Buffer& src, uint64_t count, uint64_t src_offset = 0) {
  std::vector<T> out(count);
  download(context, src, src_offset, std::as_writable_bytes(std::span<T>(out)));
  return out;
}
// A new buffer of `kind` holding `data`.
template <typename T>
Buffer make_buffer(Context& context, std::span<const T> data, MemoryKind kind);

}  // namespace kvtrie::vk

#include "kernels/vk/context.h"

template <typename T>
kvtrie::vk::Buffer kvtrie::vk::make_buffer(Context& context, std::span<const T> data, MemoryKind kind) {
  Buffer buffer(context.device(), data.size_bytes(), kind);
  upload(context, buffer, 0, std::as_bytes(data));
  return buffer;
}
