#include "kernels/ops/l2_prefetch.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"u32"};
constexpr OpRegistration kPrefetch{.op = "l2_prefetch", .variants = kVariants, .spec = spec_elementwise};
constexpr uint32_t kDefaultGroups = 512;  // the best of 64, 128, 512 and 1024 on an H100 (session 23)

struct PrefetchPush {
  uint32_t words[3];  // 16-byte words of each range
};
}  // namespace

void l2_prefetch(vk::CommandRecorder& rec, const Kernels& k, const std::array<vk::BufferView, 3>& ranges,
                 vk::BufferView sink, uint32_t groups) {
  KVTRIE_CHECK(sink.range >= 16, "l2_prefetch: the sink is 16 bytes");
  PrefetchPush push{};
  vk::Binding bindings[] = {vk::read(sink), vk::read(sink), vk::read(sink), vk::write(sink.sub(0, 16))};
  bool any = false;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].empty()) continue;
    KVTRIE_CHECK(ranges[i].range % 16 == 0 && ranges[i].range / 16 < UINT32_MAX,
                 "l2_prefetch: a range is whole 16-byte words, fewer than 2^32");
    KVTRIE_CHECK(ranges[i].buffer != sink.buffer, "l2_prefetch: a range in the sink's buffer");
    bindings[i] = vk::read(ranges[i]);
    push.words[i] = static_cast<uint32_t>(ranges[i].range / 16);
    any = true;
  }
  if (!any) return;
  rec.dispatch(k.pipeline(kPrefetch), std::span<const vk::Binding>(bindings), push,
               groups ? groups : kDefaultGroups, 1);
}

KVTRIE_REGISTER_OPS(l2_prefetch, &kPrefetch);

}  // namespace kvtrie::kernels
