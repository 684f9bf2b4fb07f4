#include "kernels/ops/rope.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
constexpr OpRegistration kRope{.op = "rope", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

void rope(vk::CommandRecorder& rec, const Kernels& k, const RopeArgs& a) {
  KVTRIE_CHECK(a.rope_dims % 2 == 0 && a.rope_dims <= a.head_dim && a.rope_dims > 0,
               "rope: rope_dims must be even, positive and at most head_dim");
  if (a.n_tokens == 0 || a.n_heads == 0) return;
  struct Push {
    uint32_t n_tokens, n_heads, head_dim, rope_dims, token_stride, neox, has_factors;
    float freq_base;
  } push{a.n_tokens,
         a.n_heads,
         a.head_dim,
         a.rope_dims,
         a.token_stride ? a.token_stride : a.n_heads * a.head_dim,
         a.mode == RopeMode::Neox ? 1u : 0u,
         a.freq_factors.empty() ? 0u : 1u,
         a.freq_base};
  const vk::BufferView factors = a.freq_factors.empty() ? a.positions : a.freq_factors;  // unread if absent
  const uint32_t local = k.workgroup_size(kRope);
  const Grid grid = grid_1d(div_up(uint64_t{a.n_tokens} * a.n_heads * (a.rope_dims / 2), local));
  rec.dispatch(k.pipeline(kRope), {vk::read_write(a.x), vk::read(a.positions), vk::read(factors)}, push,
               grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(rope, &kRope);

}  // namespace kvtrie::kernels
