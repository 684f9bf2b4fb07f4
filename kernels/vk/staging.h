// Contract: blocking host<->device copies for loading weights, tests and read-backs outside the hot loop.
// Host-visible destinations/sources are copied through their mapping; device-local ones through a temporary
// staging buffer (host-coherent for uploads, host-cached for downloads) and a one-shot transfer, waited on
// before returning. Call from the owner thread of the Context; the Buffer must be idle or only in use by
// work already waited for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/vk/buffer.h"

namespace kvtrie::vk {

class Context;

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
