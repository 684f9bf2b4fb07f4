#include "kernels/ops/add_bias.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
constexpr OpRegistration kAddBias{.op = "add_bias", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

void add_bias(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView bias,
              uint32_t rows, uint32_t n, uint32_t stride) {
  if (rows == 0 || n == 0) return;
  struct Push {
    uint32_t rows, n, stride;
  } push{rows, n, stride ? stride : n};
  const Grid grid = grid_1d(div_up(uint64_t{rows} * n, k.workgroup_size(kAddBias)));
  rec.dispatch(k.pipeline(kAddBias), {vk::read_write(x), vk::read(bias)}, push, grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(add_bias, &kAddBias);

}  // namespace kvtrie::kernels
