// l2_prefetch: reads its ranges and changes nothing (not them, not its sink), records no barrier against
// work on other buffers (so the device may run it beside them), and refuses ranges it cannot read whole.
#include <gtest/gtest.h>

#include "base/error.h"
#include "kernels/ops/add.h"
#include "kernels/ops/l2_prefetch.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class L2Prefetch : public test::VulkanTest {};

TEST_F(L2Prefetch, ChangesNoByteAndNeedsNoBarrierAgainstOtherBuffersWork) {
  const uint32_t n = 5000;
  const std::vector<float> a = random_floats(n), b = random_floats(n), weights = random_floats(3 * n);
  const std::vector<uint32_t> pattern{0xA5A5A5A5u, 1u, 2u, 3u};
  vk::Buffer ba = device_buffer(a), bb = device_buffer(b), bo = device_buffer(std::vector<float>(n));
  vk::Buffer bw = device_buffer(weights), sink = device_buffer(pattern);
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  add(rec, k, ba.view(0, n * 4), bb.view(0, n * 4), bo.view(0, n * 4), n);
  // Ranges of odd lengths and offsets, one slot empty, 3 work groups: several rounds a thread.
  l2_prefetch(rec, k, {bw.view(16, 16 * 1001), vk::BufferView{}, bw.view(4 * n, 16 * 2000)}, sink.view(0, 16),
              3);
  l2_prefetch(rec, k, {bw.view(0, 16)}, sink.view(0, 16));  // after a writer of the sink: a barrier
  const uint32_t barriers = rec.barrier_count();
  rec.end();
  rec.submit_and_wait();
  EXPECT_EQ(barriers, 1u) << "a barrier between add and l2_prefetch, or none before the second sink write";
  EXPECT_EQ(read_back<float>(bw, 3 * n), weights);
  EXPECT_EQ(read_back<uint32_t>(sink, 4), pattern);
  const std::vector<float> out = read_back<float>(bo, n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << i;
}

TEST_F(L2Prefetch, RefusesPartWordsAndRangesInTheSink) {
  vk::Buffer bw = device_buffer(random_floats(64)), sink = device_buffer(std::vector<uint32_t>(8));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  EXPECT_THROW(l2_prefetch(rec, k, {bw.view(0, 20)}, sink.view(0, 16)), Error);
  EXPECT_THROW(l2_prefetch(rec, k, {sink.view(16, 16)}, sink.view(0, 16)), Error);
  EXPECT_THROW(l2_prefetch(rec, k, {bw.view(0, 16)}, sink.view(0, 8)), Error);
  rec.end();
}

}  // namespace
}  // namespace kvtrie::kernels
