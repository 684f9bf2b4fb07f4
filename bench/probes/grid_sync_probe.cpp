#include "bench/probes/grid_sync_probe.h"

#include "base/error.h"
#include "bench/probes/bench_shaders.h"

namespace kvtrie::bench {

namespace {
// A row Kernels does not list (kernels/ops/op_registry.h): never prewarmed; its SPIR-V is bench's.
constexpr std::string_view kVariants[] = {"u32"};
constexpr kernels::OpRegistration kGridSyncProbe{.op = "grid_sync_probe",
                                                 .variants = kVariants,
                                                 .spec = kernels::spec_elementwise,
                                                 .spirv = find_bench_spirv};
}  // namespace

void grid_sync_probe(vk::CommandRecorder& rec, const kernels::Kernels& k, vk::BufferView sync,
                     vk::BufferView data, uint32_t groups, uint32_t phases, bool with_sync) {
  KVTRIE_CHECK(sync.range >= 8 && data.range >= uint64_t{groups} * 4, "grid_sync_probe: buffers too small");
  const struct { uint32_t phases, sync; } push{phases, with_sync ? 1u : 0u};
  rec.dispatch(k.pipeline(kGridSyncProbe), {vk::write(sync), vk::write(data)}, push, groups);
}

}  // namespace kvtrie::bench
