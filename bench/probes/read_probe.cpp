#include "bench/probes/read_probe.h"

#include "base/error.h"
#include "bench/probes/bench_shaders.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::bench {

using kernels::div_up;

namespace {
// A row Kernels does not list (kernels/ops/op_registry.h): never prewarmed; its SPIR-V is bench's.
constexpr std::string_view kVariants[] = {"u32"};
constexpr kernels::OpRegistration kReadProbe{
    .op = "read_probe", .variants = kVariants, .spec = kernels::spec_elementwise, .spirv = find_bench_spirv};
}  // namespace

void read_probe(vk::CommandRecorder& rec, const kernels::Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads) {
  KVTRIE_CHECK(src.range % 16 == 0 && src.range / 16 <= UINT32_MAX, "read_probe: whole 16-byte elements");
  const uint32_t wg = k.workgroup_size(kReadProbe);
  KVTRIE_CHECK(sink.range >= uint64_t{read_probe_invocations(k, threads)} * 4,
               "read_probe: sink smaller than one word per invocation");
  const uint32_t push = static_cast<uint32_t>(src.range / 16);
  rec.dispatch(k.pipeline(kReadProbe), {vk::read(src), vk::write(sink)}, push, div_up(threads, wg));
}

uint32_t read_probe_invocations(const kernels::Kernels& k, uint32_t threads) {
  const uint32_t wg = k.workgroup_size(kReadProbe);
  return div_up(threads, wg) * wg;
}

}  // namespace kvtrie::bench
