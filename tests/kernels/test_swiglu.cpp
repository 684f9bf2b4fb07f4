// swiglu against the reference in this file, on a prime count (not a multiple of the work group), and its
// joined form (gate and up halves of one product's rows).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops/ops.h"
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

}  // namespace
}  // namespace kvtrie::kernels
