#include "bench/probes/read_probe.h"

#include <string>

#include "base/error.h"
#include "bench/probes/bench_shaders.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::bench {

using kernels::div_up;

namespace {
// A row Kernels does not list (kernels/ops/op_registry.h): never prewarmed; its SPIR-V is bench's.
constexpr std::string_view kVariants[] = {"u32"};
// Work groups of the elementwise ops' size, UNROLL loads a round.
template <uint32_t Unroll>
vk::SpecConstants spec_unroll(const vk::Device& d) {
  return {kernels::spec_elementwise(d)[0], Unroll};
}
template <uint32_t Unroll>
constexpr kernels::OpRegistration kReadProbe{
    .op = "read_probe", .variants = kVariants, .spec = spec_unroll<Unroll>, .spirv = find_bench_spirv};

const kernels::OpRegistration& row_of(uint32_t unroll) {
  switch (unroll) {
    case 1:
      return kReadProbe<1>;
    case 2:
      return kReadProbe<2>;
    case 4:
      return kReadProbe<4>;
    case 8:
      return kReadProbe<8>;
    default:
      throw Error("read_probe: loads a round must be 1, 2, 4 or 8, not " + std::to_string(unroll));
  }
}
}  // namespace

void read_probe(vk::CommandRecorder& rec, const kernels::Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads, uint32_t unroll) {
  const kernels::OpRegistration& row = row_of(unroll);
  const uint32_t wg = k.workgroup_size(row);
  KVTRIE_CHECK(src.range % 16 == 0 && src.range / 16 + 8ull * div_up(threads, wg) * wg <= UINT32_MAX,
               "read_probe: whole 16-byte elements, their index and a round past them within 32 bits");
  KVTRIE_CHECK(sink.range >= uint64_t{read_probe_invocations(k, threads)} * 4,
               "read_probe: sink smaller than one word per invocation");
  const uint32_t push = static_cast<uint32_t>(src.range / 16);
  rec.dispatch(k.pipeline(row), {vk::read(src), vk::write(sink)}, push, div_up(threads, wg));
}

uint32_t read_probe_invocations(const kernels::Kernels& k, uint32_t threads) {
  const uint32_t wg = k.workgroup_size(kReadProbe<1>);
  return div_up(threads, wg) * wg;
}

}  // namespace kvtrie::bench
