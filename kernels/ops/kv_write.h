// Contract: kv_write, one layer's K and V rows of a batch into the f16 KV pages (kv_write.comp), K
// optionally rotated on the way (kv_write_rope).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/ops/kv_layout.h"
#include "kernels/ops/rope.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// Stores one layer's K and V rows (f32) of a batch into f16 pages at slots[t] (int32, global slot =
// page * P + slot_in_page; negative = skip). `pages` binds pages [page_begin, page_begin + page_count) of
// the pool (call once per chunk when the pool is split).
struct KvWriteArgs {
  vk::BufferView k, v, slots, pages;
  KvLayout layout;
  uint32_t layer = 0;
  uint32_t n_tokens = 0;
  uint32_t k_stride = 0, v_stride = 0;  // floats between tokens (0: kv_dim)
  uint32_t page_begin = 0, page_count = 0;
};
void kv_write(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a);
// kv_write with K rotated on the way by normal-mode rope (rope.mode must be Normal; rope.x, n_tokens and
// n_heads are ignored: K comes from a.k, one token per row); the K buffer is left unrotated. With q_rope
// (the same positions, factors, base and dims), Q (q_rope.x, q_rope.n_heads heads a token) is also rotated
// in place, as rope(q_rope) would; a pool split into chunks passes it with one chunk only.
void kv_write_rope(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a, const RopeArgs& rope,
                   const RopeArgs* q_rope = nullptr);

}  // namespace kvtrie::kernels
