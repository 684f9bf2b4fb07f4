// Contract: the layout of the KV page pool, shared by kv_write (vk), attention (mm) and cache/. Pure data,
// header-only, any thread.
//
// A page holds P tokens of ALL layers' K and V, as f16, in one contiguous range (so one page is one copy):
//   page p, layer l:  K block [P][kv_dim]  then  V block [P][kv_dim]
//   element offset of (page p, layer l, K or V, slot s in page, channel c) =
//     p * page_elements + l * 2 * P * kv_dim + (V ? P * kv_dim : 0) + s * kv_dim + c
//   with kv_dim = n_kv_heads * head_dim and page_elements = n_layers * 2 * P * kv_dim.
// A token's global slot is page * P + slot_in_page (what kv_write's slot indices hold).
// A pool larger than maxStorageBufferRange is split into chunks of whole pages, each bound on its own;
// shaders then get the chunk's first page (page_begin) and skip pages outside it.
#pragma once
#include <cstdint>

namespace kvtrie::kernels {

struct KvLayout {
  uint32_t n_layers = 0;
  uint32_t page_tokens = 0;  // P
  uint32_t kv_dim = 0;       // n_kv_heads * head_dim (even)

  uint64_t page_elements() const { return uint64_t{n_layers} * 2 * page_tokens * kv_dim; }
  uint64_t page_bytes() const { return page_elements() * 2; }  // f16
  uint64_t block_elements() const { return uint64_t{page_tokens} * kv_dim; }
  uint64_t offset_elements(uint64_t page, uint32_t layer, bool value, uint32_t slot, uint32_t channel) const {
    return page * page_elements() + uint64_t{layer} * 2 * block_elements() + (value ? block_elements() : 0) +
           uint64_t{slot} * kv_dim + channel;
  }
  // Whole pages that fit one binding of at most max_range bytes.
  uint64_t pages_per_binding(uint64_t max_range) const { return max_range / page_bytes(); }
};

}  // namespace kvtrie::kernels
