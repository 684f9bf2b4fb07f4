#include "kernels/ops/grid_sync_probe.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
// A benchmark's probe: a row Kernels does not list (op_registry.h), so it is never prewarmed.
constexpr std::string_view kVariants[] = {"u32"};
constexpr OpRegistration kGridSyncProbe{
    .op = "grid_sync_probe", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

void grid_sync_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView sync, vk::BufferView data,
                     uint32_t groups, uint32_t phases, bool with_sync) {
  KVTRIE_CHECK(sync.range >= 8 && data.range >= uint64_t{groups} * 4, "grid_sync_probe: buffers too small");
  const struct { uint32_t phases, sync; } push{phases, with_sync ? 1u : 0u};
  rec.dispatch(k.pipeline(kGridSyncProbe), {vk::write(sync), vk::write(data)}, push, groups);
}

}  // namespace kvtrie::kernels
