#include "kernels/ops/convert.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32_f16"};
constexpr OpRegistration kConvert{.op = "convert", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

void convert_f16(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView out,
                 uint32_t count) {
  KVTRIE_CHECK(count % 2 == 0, "convert_f16: an even count of values (two per word)");
  if (count == 0) return;
  const uint32_t pairs = count / 2;
  const Grid grid = grid_1d(div_up(pairs, k.workgroup_size(kConvert)));
  rec.dispatch(k.pipeline(kConvert), {vk::read(x), vk::write(out)}, pairs, grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(convert, &kConvert);

}  // namespace kvtrie::kernels
