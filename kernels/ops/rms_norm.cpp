#include "kernels/error.h"
#include "kernels/ops/op_util.h"
#include "kernels/ops/ops.h"

namespace kvtrie::kernels {

void rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a) {
  KVTRIE_CHECK(a.n > 0 && a.heads > 0, "rms_norm: empty rows");
  if (a.rows == 0) return;
  struct Push {
    uint32_t rows, n, heads, x_stride, y_stride, has_weight;
    float eps;
  } push{a.rows,
         a.n,
         a.heads,
         a.x_stride ? a.x_stride : a.n * a.heads,
         a.y_stride ? a.y_stride : a.n * a.heads,
         a.weight.empty() ? 0u : 1u,
         a.eps};
  const vk::BufferView weight = a.weight.empty() ? a.x : a.weight;  // bound but unread when absent
  const Grid grid = grid_1d(a.rows);
  rec.dispatch(k.pipeline("rms_norm", "f32"), {vk::read(a.x), vk::read(weight), vk::write(a.y)}, push, grid.x,
               grid.y);
}

}  // namespace kvtrie::kernels
