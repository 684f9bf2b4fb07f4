#include "kernels/ops/convert.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

void convert_f16(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView out,
                 uint32_t count) {
  KVTRIE_CHECK(count % 2 == 0, "convert_f16: an even count of values (two per word)");
  if (count == 0) return;
  const uint32_t pairs = count / 2;
  const Grid grid = grid_1d(div_up(pairs, k.workgroup_size("convert")));
  rec.dispatch(k.pipeline("convert", "f32_f16"), {vk::read(x), vk::write(out)}, pairs, grid.x, grid.y);
}

}  // namespace kvtrie::kernels
