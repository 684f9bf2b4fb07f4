#include "kernels/ops/read_probe.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
// A benchmark's probe: a row Kernels does not list (op_registry.h), so it is never prewarmed.
constexpr std::string_view kVariants[] = {"u32"};
constexpr OpRegistration kReadProbe{.op = "read_probe", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

void read_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads) {
  KVTRIE_CHECK(src.range % 16 == 0 && src.range / 16 <= UINT32_MAX, "read_probe: whole 16-byte elements");
  const uint32_t wg = k.workgroup_size(kReadProbe);
  KVTRIE_CHECK(sink.range >= uint64_t{read_probe_invocations(k, threads)} * 4,
               "read_probe: sink smaller than one word per invocation");
  const uint32_t push = static_cast<uint32_t>(src.range / 16);
  rec.dispatch(k.pipeline(kReadProbe), {vk::read(src), vk::write(sink)}, push, div_up(threads, wg));
}

uint32_t read_probe_invocations(const Kernels& k, uint32_t threads) {
  const uint32_t wg = k.workgroup_size(kReadProbe);
  return div_up(threads, wg) * wg;
}

}  // namespace kvtrie::kernels
