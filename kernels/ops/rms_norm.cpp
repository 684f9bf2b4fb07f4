#include "kernels/ops/rms_norm.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
// The variants of rms_norm.comp (_f16: f16 out), indices of kVariants.
enum Variant : uint32_t { kF32, kAddF32, kF32F16, kAddF32F16 };
constexpr std::string_view kVariants[] = {"f32", "add_f32", "f32_f16", "add_f32_f16"};
constexpr OpRegistration kRmsNorm{.op = "rms_norm", .variants = kVariants, .spec = spec_row_reduce};

struct RmsNormPush {
  uint32_t rows, n, heads, x_stride, y_stride, has_weight;
  float eps;
};

RmsNormPush push_of(const RmsNormArgs& a) {
  KVTRIE_CHECK(a.n > 0 && a.heads > 0, "rms_norm: empty rows");
  KVTRIE_CHECK(!a.half_out || (a.n % 2 == 0 && (a.y_stride ? a.y_stride : a.n * a.heads) % 2 == 0),
               "rms_norm: an f16 output takes rows of whole pairs");
  return {a.rows,
          a.n,
          a.heads,
          a.x_stride ? a.x_stride : a.n * a.heads,
          a.y_stride ? a.y_stride : a.n * a.heads,
          a.weight.empty() ? 0u : 1u,
          a.eps};
}

}  // namespace

void rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a) {
  const RmsNormPush push = push_of(a);
  if (a.rows == 0) return;
  const vk::BufferView weight = a.weight.empty() ? a.x : a.weight;  // bound but unread when absent
  const Grid grid = grid_1d(a.rows);
  rec.dispatch(k.pipeline(kRmsNorm, a.half_out ? kF32F16 : kF32),
               {vk::read(a.x), vk::read(weight), vk::write(a.y)}, push, grid.x, grid.y);
}

void add_rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a, vk::BufferView residual) {
  const RmsNormPush push = push_of(a);
  if (a.rows == 0) return;
  const vk::BufferView weight = a.weight.empty() ? residual : a.weight;  // bound but unread when absent
  const Grid grid = grid_1d(a.rows);
  rec.dispatch(k.pipeline(kRmsNorm, a.half_out ? kAddF32F16 : kAddF32),
               {vk::read_write(a.x), vk::read(weight), vk::write(a.y), vk::read(residual)}, push, grid.x,
               grid.y);
}

KVTRIE_REGISTER_OPS(rms_norm, &kRmsNorm);

}  // namespace kvtrie::kernels
