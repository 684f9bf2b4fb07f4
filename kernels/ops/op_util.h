// Contract: small helpers shared by op dispatch functions. Header-only, pure functions; any thread.
#pragma once
#include <cstdint>

#include "base/error.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/device.h"

namespace kvtrie::kernels {

// A view whose offset is aligned down to the device's minStorageBufferOffsetAlignment, and the byte offset
// of the original view's start inside it. Shaders that read at arbitrary byte offsets (rows of quantized
// types) bind `view` and add `byte_offset` (a push constant).
struct AlignedBinding {
  vk::BufferView view;
  uint32_t byte_offset;
};

inline AlignedBinding align_binding(const vk::Device& device, vk::BufferView v) {
  const uint64_t alignment = device.info().min_storage_buffer_offset_alignment;
  const uint64_t delta = v.offset % alignment;
  AlignedBinding out{{v.buffer, v.offset - delta, v.range + delta}, static_cast<uint32_t>(delta)};
  // Shaders read 32-bit words: round the range up to whole words (the caller's buffer must hold them).
  out.view.range = (out.view.range + 3) / 4 * 4;
  return out;
}

inline uint32_t div_up(uint64_t n, uint32_t d) {
  return static_cast<uint32_t>((n + d - 1) / d);
}

// Splits a 1-D element count into a grid that respects maxComputeWorkGroupCount[0] (65535 is the minimum
// every device guarantees): x groups * y groups; shaders index with gl_WorkGroupID.y * gl_NumWorkGroups.x.
struct Grid {
  uint32_t x, y;
};
inline Grid grid_1d(uint64_t groups) {
  constexpr uint32_t kMaxX = 65535;
  if (groups <= kMaxX) return {static_cast<uint32_t>(groups == 0 ? 1 : groups), 1};
  return {kMaxX, div_up(groups, kMaxX)};
}

// Row reductions in two passes (argmax_rows, top_k_rows): work group (c, row) takes the row's chunk c of
// kRowChunk values (128K logits make 63 chunks, read at once), then a merge a row. Their scratch holds
// `per_chunk` values of every chunk of every row, then as many indices from row_chunk_index_offset (256
// bytes aligned: every device's binding alignment).
inline constexpr uint32_t kRowChunk = 2048;
inline uint32_t row_chunks(uint32_t n) {
  return div_up(n, kRowChunk);
}
inline uint64_t row_chunk_index_offset(uint32_t rows, uint32_t n, uint32_t per_chunk) {
  return (uint64_t{rows} * row_chunks(n) * per_chunk * 4 + 255) / 256 * 256;
}

}  // namespace kvtrie::kernels
