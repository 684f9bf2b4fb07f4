// swiglu, add, add_bias (one invocation per value), read_probe and grid_sync_probe: a few lines each.
#include <cstdint>

#include "base/error.h"
#include "kernels/ops/op_util.h"
#include "kernels/ops/ops.h"

namespace kvtrie::kernels {

namespace {
// swiglu.comp over count outputs; joined != 0: gate and up are the halves of each token's row in one buffer.
void dispatch_swiglu(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate, vk::BufferView up,
                     vk::BufferView out, uint32_t count, uint32_t joined, bool half_out) {
  KVTRIE_CHECK(!half_out || (count % 2 == 0 && joined % 2 == 0),
               "swiglu: an f16 output takes pairs of values");
  if (count == 0) return;
  struct Push {
    uint32_t count, joined;
  };
  const Grid grid = grid_1d(div_up(half_out ? count / 2 : count, k.workgroup_size("swiglu")));
  rec.dispatch(k.pipeline("swiglu", half_out ? "f32_f16" : "f32"),
               {vk::read(gate), vk::read(up), vk::write(out)}, Push{count, joined}, grid.x, grid.y);
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

void convert_f16(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView out,
                 uint32_t count) {
  KVTRIE_CHECK(count % 2 == 0, "convert_f16: an even count of values (two per word)");
  if (count == 0) return;
  const uint32_t pairs = count / 2;
  const Grid grid = grid_1d(div_up(pairs, k.workgroup_size("convert")));
  rec.dispatch(k.pipeline("convert", "f32_f16"), {vk::read(x), vk::write(out)}, pairs, grid.x, grid.y);
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

void read_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads) {
  KVTRIE_CHECK(src.range % 16 == 0 && src.range / 16 <= UINT32_MAX, "read_probe: whole 16-byte elements");
  const uint32_t wg = k.workgroup_size("read_probe");
  KVTRIE_CHECK(sink.range >= uint64_t{div_up(threads, wg)} * wg * 4,
               "read_probe: sink smaller than one word per invocation");
  const uint32_t push = static_cast<uint32_t>(src.range / 16);
  rec.dispatch(k.pipeline("read_probe", "u32"), {vk::read(src), vk::write(sink)}, push, div_up(threads, wg));
}

void grid_sync_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView sync, vk::BufferView data,
                     uint32_t groups, uint32_t phases, bool with_sync) {
  KVTRIE_CHECK(sync.range >= 8 && data.range >= uint64_t{groups} * 4, "grid_sync_probe: buffers too small");
  const struct { uint32_t phases, sync; } push{phases, with_sync ? 1u : 0u};
  rec.dispatch(k.pipeline("grid_sync_probe", "u32"), {vk::write(sync), vk::write(data)}, push, groups);
}

}  // namespace kvtrie::kernels
