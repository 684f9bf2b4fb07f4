// add (residual, in place and out of place), add_bias (strided rows) and convert_f16 against exact
// references.
#include <gtest/gtest.h>

#include "base/error.h"
#include "kernels/ops/add.h"
#include "kernels/ops/add_bias.h"
#include "kernels/ops/convert.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class Add : public test::VulkanTest {};

TEST_F(Add, SumsElementwiseOutOfPlaceAndInPlace) {
  const uint32_t n = 1297;
  const std::vector<float> a = random_floats(n), b = random_floats(n);
  vk::Buffer ba = device_buffer(a), bb = device_buffer(b), bo = device_buffer(std::vector<float>(n));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  add(rec, k, ba.view(0, n * 4), bb.view(0, n * 4), bo.view(0, n * 4), n);
  add(rec, k, ba.view(0, n * 4), bb.view(0, n * 4), ba.view(0, n * 4), n);  // a += b
  add(rec, k, ba.view(0, n * 4), bb.view(0, n * 4), ba.view(0, n * 4), n);  // a += b again: needs a barrier
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> out = read_back<float>(bo, n), twice = read_back<float>(ba, n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], a[i] + b[i]) << i;
    ASSERT_EQ(twice[i], (a[i] + b[i]) + b[i]) << i;
  }
}

TEST_F(Add, BiasIsAddedToEveryRowOfAStridedMatrix) {
  const uint32_t rows = 13, n = 97, stride = 101;
  const std::vector<float> x = random_floats(size_t{rows} * stride), bias = random_floats(n);
  vk::Buffer bx = device_buffer(x), bb = device_buffer(bias);
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  add_bias(rec, k, bx.view(0, x.size() * 4), bb.view(0, n * 4), rows, n, stride);
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> got = read_back<float>(bx, x.size());
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < stride; ++c) {
      const size_t i = size_t{r} * stride + c;
      ASSERT_EQ(got[i], c < n ? x[i] + bias[c] : x[i]) << r << "," << c;
    }
}

// The f16 copy of x equals the host's round-to-nearest-even conversion bit for bit, values past the f16
// range included; an odd count (half a word) is refused.
TEST_F(Add, ConvertF16RoundsEveryValueToNearestEven) {
  const uint32_t n = 1298;
  std::vector<float> x = random_floats(n);
  x[0] = 70000.0f;      // overflows to inf
  x[1] = 1.0f + 1e-4f;  // rounds
  x[2] = -3.0e-6f;      // an f16 subnormal
  vk::Buffer bx = device_buffer(x), bo(context().device(), n * 2, vk::MemoryKind::DeviceLocal);
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  convert_f16(rec, k, bx.view(0, n * 4), bo.view(0, n * 2), n);
  EXPECT_THROW(convert_f16(rec, k, bx.view(0, n * 4), bo.view(0, n * 2), n - 1), Error);
  rec.end();
  rec.submit_and_wait();
  const std::vector<uint16_t> got = read_back<uint16_t>(bo, n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], fp32_to_fp16(x[i])) << i << ": " << x[i];
}

}  // namespace
}  // namespace kvtrie::kernels
