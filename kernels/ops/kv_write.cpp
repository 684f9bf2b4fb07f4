#include "kernels/error.h"
#include "kernels/ops/op_util.h"
#include "kernels/ops/ops.h"

namespace kvtrie::kernels {

void kv_write(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a) {
  const KvLayout& l = a.layout;
  KVTRIE_CHECK(l.kv_dim % 2 == 0 && l.kv_dim > 0, "kv_write: kv_dim must be even");
  KVTRIE_CHECK(a.layer < l.n_layers, "kv_write: layer out of range");
  KVTRIE_CHECK(a.pages.range >= l.page_bytes() * a.page_count, "kv_write: pages view smaller than its pages");
  if (a.n_tokens == 0 || a.page_count == 0) return;
  struct Push {
    uint32_t n_tokens, kv_dim, k_stride, v_stride, page_tokens, n_layers, layer, page_begin, page_count;
  } push{a.n_tokens,
         l.kv_dim,
         a.k_stride ? a.k_stride : l.kv_dim,
         a.v_stride ? a.v_stride : l.kv_dim,
         l.page_tokens,
         l.n_layers,
         a.layer,
         a.page_begin,
         a.page_count};
  const Grid grid = grid_1d(div_up(uint64_t{a.n_tokens} * (l.kv_dim / 2), k.workgroup_size("kv_write")));
  rec.dispatch(k.pipeline("kv_write", "f16"),
               {vk::read(a.k), vk::read(a.v), vk::read(a.slots), vk::read_write(a.pages)}, push, grid.x,
               grid.y);
}

}  // namespace kvtrie::kernels
