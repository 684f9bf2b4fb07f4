// add (residual, in place and out of place) and add_bias (strided rows) against exact float references.
#include <gtest/gtest.h>

#include "kernels/ops/ops.h"
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

}  // namespace
}  // namespace kvtrie::kernels
