// swiglu against the reference in this file, on a prime count (not a multiple of the work group), and its
// joined form (gate and up halves of one product's rows).
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "base/error.h"
#include "kernels/ops/swiglu.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class Swiglu : public test::VulkanTest {};

TEST_F(Swiglu, MatchesSiluTimesUp) {
  const uint32_t n = 3001;
  const std::vector<float> gate = random_floats(n, -8.0f, 8.0f), up = random_floats(n, -2.0f, 2.0f);
  vk::Buffer bg = device_buffer(gate), bu = device_buffer(up),
             bo = device_buffer(std::vector<float>(n + 1, 7.0f));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  swiglu(rec, k, bg.view(0, n * 4), bu.view(0, n * 4), bo.view(0, n * 4), n);
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> got = read_back<float>(bo, n + 1);
  for (uint32_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    ASSERT_NEAR(got[i], want, 1e-5 * std::max(1.0, std::fabs(want))) << i;
  }
  EXPECT_EQ(got[n], 7.0f) << "wrote past count";
}

// The joined form: each token's row holds n gate values then n up values (one product of [gate; up]).
TEST_F(Swiglu, JoinedRowsMatchSiluOfTheFirstHalfTimesTheSecond) {
  const uint32_t tokens = 3, n = 1001;
  const std::vector<float> gate_up = random_floats(2 * tokens * n, -8.0f, 8.0f);
  vk::Buffer bi = device_buffer(gate_up), bo = device_buffer(std::vector<float>(tokens * n + 1, 7.0f));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  swiglu_joined(rec, k, bi.view(), bo.view(0, tokens * n * 4), tokens, n);
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> got = read_back<float>(bo, tokens * n + 1);
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint32_t c = 0; c < n; ++c) {
      const double g = gate_up[t * 2 * n + c], u = gate_up[t * 2 * n + n + c];
      const double want = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(got[t * n + c], want, 1e-5 * std::max(1.0, std::fabs(want))) << t << " " << c;
    }
  EXPECT_EQ(got[tokens * n], 7.0f) << "wrote past tokens * n";
}

// The f16 output (a tensor-core product's x): the host's round-to-nearest-even of the f32 output, bit for
// bit, plain and joined.
TEST_F(Swiglu, HalfOutputIsTheF16OfTheOutput) {
  const uint32_t tokens = 3, n = 1000;
  const std::vector<float> gate_up = random_floats(2 * tokens * n, -8.0f, 8.0f);
  const uint32_t count = tokens * n;
  vk::Buffer bi = device_buffer(gate_up), bf(context().device(), count * 4, vk::MemoryKind::DeviceLocal);
  vk::Buffer bh(context().device(), count * 2, vk::MemoryKind::DeviceLocal);
  vk::Buffer jf(context().device(), count * 4, vk::MemoryKind::DeviceLocal);
  vk::Buffer jh(context().device(), count * 2, vk::MemoryKind::DeviceLocal);
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  const vk::BufferView gate = bi.view(0, count * 4), up = bi.view(count * 4, count * 4);
  swiglu(rec, k, gate, up, bf.view(), count);
  swiglu(rec, k, gate, up, bh.view(), count, true);
  swiglu_joined(rec, k, bi.view(), jf.view(), tokens, n);
  swiglu_joined(rec, k, bi.view(), jh.view(), tokens, n, true);
  EXPECT_THROW(swiglu(rec, k, gate, up, bh.view(), count - 1, true), Error);
  rec.end();
  rec.submit_and_wait();
  for (const auto& [f32, f16] : {std::pair{&bf, &bh}, std::pair{&jf, &jh}}) {
    const std::vector<float> want = read_back<float>(*f32, count);
    const std::vector<uint16_t> got = read_back<uint16_t>(*f16, count);
    for (uint32_t i = 0; i < count; ++i) ASSERT_EQ(got[i], fp32_to_fp16(want[i])) << i;
  }
}

}  // namespace
}  // namespace kvtrie::kernels
