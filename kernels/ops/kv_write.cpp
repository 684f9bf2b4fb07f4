#include "kernels/ops/kv_write.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {

enum Variant : uint32_t { kF16, kRopeF16, kRopeQkvF16 };
constexpr std::string_view kVariants[] = {"f16", "rope_f16", "rope_qkv_f16"};
constexpr OpRegistration kKvWrite{.op = "kv_write", .variants = kVariants, .spec = spec_elementwise};

struct KvWritePush {
  uint32_t n_tokens, kv_dim, k_stride, v_stride, page_tokens, n_layers, layer, page_begin, page_count;
};

KvWritePush push_of(const KvWriteArgs& a) {
  const KvLayout& l = a.layout;
  KVTRIE_CHECK(l.kv_dim % 2 == 0 && l.kv_dim > 0, "kv_write: kv_dim must be even");
  KVTRIE_CHECK(a.layer < l.n_layers, "kv_write: layer out of range");
  KVTRIE_CHECK(a.pages.range >= l.page_bytes() * a.page_count, "kv_write: pages view smaller than its pages");
  return {a.n_tokens,
          l.kv_dim,
          a.k_stride ? a.k_stride : l.kv_dim,
          a.v_stride ? a.v_stride : l.kv_dim,
          l.page_tokens,
          l.n_layers,
          a.layer,
          a.page_begin,
          a.page_count};
}

Grid grid_of(const Kernels& k, const KvWriteArgs& a) {
  return grid_1d(div_up(uint64_t{a.n_tokens} * (a.layout.kv_dim / 2), k.workgroup_size(kKvWrite)));
}

}  // namespace

void kv_write(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a) {
  const KvWritePush push = push_of(a);
  if (a.n_tokens == 0 || a.page_count == 0) return;
  const Grid grid = grid_of(k, a);
  rec.dispatch(k.pipeline(kKvWrite, kF16),
               {vk::read(a.k), vk::read(a.v), vk::read(a.slots), vk::read_write(a.pages)}, push, grid.x,
               grid.y);
}

void kv_write_rope(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a, const RopeArgs& rope,
                   const RopeArgs* q_rope) {
  struct RopePush {
    uint32_t head_dim, rope_dims, has_factors;
    float freq_base;
  };
  const KvWritePush base = push_of(a);
  const RopePush r{rope.head_dim, rope.rope_dims ? rope.rope_dims : rope.head_dim,
                   rope.freq_factors.empty() ? 0u : 1u, rope.freq_base};
  KVTRIE_CHECK(rope.mode == RopeMode::Normal, "kv_write_rope: normal-mode rope only");
  KVTRIE_CHECK(rope.head_dim > 0 && a.layout.kv_dim % rope.head_dim == 0 && r.rope_dims % 2 == 0 &&
                   r.rope_dims <= rope.head_dim,
               "kv_write_rope: heads must tile kv_dim and rope_dims be even and at most head_dim");
  const vk::BufferView factors = rope.freq_factors.empty() ? rope.positions : rope.freq_factors;  // unread
  if (!q_rope) {
    if (a.n_tokens == 0 || a.page_count == 0) return;
    const struct {
      KvWritePush base;
      RopePush rope;
    } push{base, r};
    const Grid grid = grid_of(k, a);
    rec.dispatch(k.pipeline(kKvWrite, kRopeF16),
                 {vk::read(a.k), vk::read(a.v), vk::read(a.slots), vk::read_write(a.pages),
                  vk::read(rope.positions), vk::read(factors)},
                 push, grid.x, grid.y);
    return;
  }
  // K, V and Q are rows of one buffer, bound once (read and written in one dispatch).
  const vk::BufferView& q = q_rope->x;
  KVTRIE_CHECK(q_rope->mode == rope.mode && q_rope->head_dim == rope.head_dim &&
                   q_rope->rope_dims == rope.rope_dims && q_rope->freq_base == rope.freq_base &&
                   q_rope->freq_factors.empty() == rope.freq_factors.empty() &&
                   q_rope->n_tokens == a.n_tokens,
               "kv_write_rope: Q's rope must match K's");
  KVTRIE_CHECK(a.k.buffer == q.buffer && a.v.buffer == q.buffer,
               "kv_write_rope: Q, K and V must be views of one buffer to rotate Q too");
  if (a.n_tokens == 0) return;
  const uint64_t first = std::min({a.k.offset, a.v.offset, q.offset});
  const uint64_t end = std::max({a.k.offset + a.k.range, a.v.offset + a.v.range, q.offset + q.range});
  const AlignedBinding rows = align_binding(k.device(), vk::BufferView{q.buffer, first, end - first});
  const uint64_t start = first - rows.byte_offset;  // the binding's first byte in the buffer
  auto floats_from_start = [&](const vk::BufferView& view) {
    KVTRIE_CHECK((view.offset - start) % 4 == 0, "kv_write_rope: rows must be float aligned");
    return static_cast<uint32_t>((view.offset - start) / 4);
  };
  const struct {
    KvWritePush base;
    RopePush rope;
    uint32_t k_offset, v_offset, q_offset, q_stride, q_pairs;
  } push{base,
         r,
         floats_from_start(a.k),
         floats_from_start(a.v),
         floats_from_start(q),
         q_rope->token_stride ? q_rope->token_stride : q_rope->n_heads * q_rope->head_dim,
         q_rope->n_heads * q_rope->head_dim / 2};
  const Grid grid = grid_1d(
      div_up(uint64_t{a.n_tokens} * (a.layout.kv_dim / 2 + push.q_pairs), k.workgroup_size(kKvWrite)));
  rec.dispatch(k.pipeline(kKvWrite, kRopeQkvF16),
               {vk::read_write(rows.view), vk::read(a.slots), vk::read_write(a.pages),
                vk::read(rope.positions), vk::read(factors)},
               push, grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(kv_write, &kKvWrite);

}  // namespace kvtrie::kernels
