#include "kernels/ops/swiglu.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
enum Variant : uint32_t { kF32, kF32F16 };  // _f16: f16 out
constexpr std::string_view kVariants[] = {"f32", "f32_f16"};
constexpr OpRegistration kSwiglu{.op = "swiglu", .variants = kVariants, .spec = spec_elementwise};

// swiglu.comp over count outputs; joined != 0: gate and up are the halves of each token's row in one buffer.
void dispatch_swiglu(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate, vk::BufferView up,
                     vk::BufferView out, uint32_t count, uint32_t joined, bool half_out) {
  KVTRIE_CHECK(!half_out || (count % 2 == 0 && joined % 2 == 0),
               "swiglu: an f16 output takes pairs of values");
  if (count == 0) return;
  struct Push {
    uint32_t count, joined;
  };
  const Grid grid = grid_1d(div_up(half_out ? count / 2 : count, k.workgroup_size(kSwiglu)));
  rec.dispatch(k.pipeline(kSwiglu, half_out ? kF32F16 : kF32), {vk::read(gate), vk::read(up), vk::write(out)},
               Push{count, joined}, grid.x, grid.y);
}
}  // namespace

void swiglu(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate, vk::BufferView up,
            vk::BufferView out, uint32_t count, bool half_out) {
  dispatch_swiglu(rec, k, gate, up, out, count, 0, half_out);
}

void swiglu_joined(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate_up, vk::BufferView out,
                   uint32_t tokens, uint32_t n, bool half_out) {
  dispatch_swiglu(rec, k, gate_up, gate_up, out, tokens * n, n, half_out);
}

KVTRIE_REGISTER_OPS(swiglu, &kSwiglu);

}  // namespace kvtrie::kernels
