// swiglu against the reference in this file, on a prime count (not a multiple of the work group).
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

}  // namespace
}  // namespace kvtrie::kernels
