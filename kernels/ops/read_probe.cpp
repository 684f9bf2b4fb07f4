#include "kernels/ops/read_probe.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

void read_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads) {
  KVTRIE_CHECK(src.range % 16 == 0 && src.range / 16 <= UINT32_MAX, "read_probe: whole 16-byte elements");
  const uint32_t wg = k.workgroup_size("read_probe");
  KVTRIE_CHECK(sink.range >= uint64_t{div_up(threads, wg)} * wg * 4,
               "read_probe: sink smaller than one word per invocation");
  const uint32_t push = static_cast<uint32_t>(src.range / 16);
  rec.dispatch(k.pipeline("read_probe", "u32"), {vk::read(src), vk::write(sink)}, push, div_up(threads, wg));
}

}  // namespace kvtrie::kernels
