#include "kernels/ops/add.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
constexpr OpRegistration kAdd{.op = "add", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

void add(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView a, vk::BufferView b, vk::BufferView out,
         uint32_t count) {
  if (count == 0) return;
  const Grid grid = grid_1d(div_up(count, k.workgroup_size(kAdd)));
  rec.dispatch(k.pipeline(kAdd), {vk::read(a), vk::read(b), vk::write(out)}, count, grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(add, &kAdd);

}  // namespace kvtrie::kernels
