#include "kernels/ops/add.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

void add(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView a, vk::BufferView b, vk::BufferView out,
         uint32_t count) {
  if (count == 0) return;
  const Grid grid = grid_1d(div_up(count, k.workgroup_size("add")));
  rec.dispatch(k.pipeline("add", "f32"), {vk::read(a), vk::read(b), vk::write(out)}, count, grid.x, grid.y);
}

}  // namespace kvtrie::kernels
