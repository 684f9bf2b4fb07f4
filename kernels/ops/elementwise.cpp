// swiglu, add, add_bias: one invocation per value, so they share this file's few lines each.
#include "kernels/ops/op_util.h"
#include "kernels/ops/ops.h"

namespace kvtrie::kernels {

void swiglu(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate, vk::BufferView up,
            vk::BufferView out, uint32_t count) {
  if (count == 0) return;
  const Grid grid = grid_1d(div_up(count, k.workgroup_size("swiglu")));
  rec.dispatch(k.pipeline("swiglu", "f32"), {vk::read(gate), vk::read(up), vk::write(out)}, count, grid.x,
               grid.y);
}

void add(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView a, vk::BufferView b, vk::BufferView out,
         uint32_t count) {
  if (count == 0) return;
  const Grid grid = grid_1d(div_up(count, k.workgroup_size("add")));
  rec.dispatch(k.pipeline("add", "f32"), {vk::read(a), vk::read(b), vk::write(out)}, count, grid.x, grid.y);
}

void add_bias(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView bias,
              uint32_t rows, uint32_t n, uint32_t stride) {
  if (rows == 0 || n == 0) return;
  struct Push {
    uint32_t rows, n, stride;
  } push{rows, n, stride ? stride : n};
  const Grid grid = grid_1d(div_up(uint64_t{rows} * n, k.workgroup_size("add_bias")));
  rec.dispatch(k.pipeline("add_bias", "f32"), {vk::read_write(x), vk::read(bias)}, push, grid.x, grid.y);
}

}  // namespace kvtrie::kernels
