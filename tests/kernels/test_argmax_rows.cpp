// argmax_rows: each row's index is a plain scan's (the first strictly larger value, NaN never larger: what
// Sampler's greedy picks; ties and all-masked rows to the lowest index), over rows longer than a work
// group's pass and across the chunks the first pass splits a row into, several rows at once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>

#include "base/error.h"
#include "kernels/ops/argmax_rows.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class ArgmaxRows : public test::VulkanTest {};

uint32_t first_largest(std::span<const float> row) {
  float best = -std::numeric_limits<float>::infinity();
  uint32_t at = 0;
  for (uint32_t i = 0; i < row.size(); ++i)
    if (row[i] > best) {
      best = row[i];
      at = i;
    }
  return at;
}

TEST_F(ArgmaxRows, EachRowGetsAPlainScansPick) {
  const uint32_t n = 20011, rows = 7;
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(11);
  std::vector<float> values(uint64_t{rows} * n);
  for (float& v : values) v = static_cast<float>(rng() % 64) * 0.5f - 16.0f;  // many ties
  for (int i = 0; i < 300; ++i) values[rng() % values.size()] = std::nanf("");
  for (int i = 0; i < 300; ++i) values[rng() % values.size()] = -inf;
  values[3 * n + 17000] = 40.0f;  // row 3: a best far past the first pass, tied at 17001
  values[3 * n + 17001] = 40.0f;
  values[2 * n + 19000] = 50.0f;  // row 2: equal bests in three chunks (of 2,048): the first wins
  values[2 * n + 2048] = 50.0f;
  values[2 * n + 2047] = 50.0f;
  values[4 * n + n - 1] = inf;  // row 4: +inf in the last place
  for (uint32_t i = 0; i < n; ++i) values[5 * n + i] = i % 2 ? -inf : std::nanf("");  // row 5: all masked
  for (uint32_t i = 0; i < n; ++i) values[6 * n + i] = i % 3 ? -0.0f : 0.0f;          // row 6: zeros
  vk::Buffer in = device_buffer(values), out = device_buffer(std::vector<uint32_t>(rows, 12345u));
  vk::Buffer scratch = device_buffer(std::vector<uint32_t>(argmax_rows_scratch_bytes(rows, n) / 4));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  argmax_rows(rec, k, in.view(), rows, n, out.view(), scratch.view());
  rec.end();
  rec.submit_and_wait();
  const std::vector<uint32_t> got = read_back<uint32_t>(out, rows);
  for (uint32_t r = 0; r < rows; ++r)
    EXPECT_EQ(got[r], first_largest(std::span<const float>(values.data() + uint64_t{r} * n, n)))
        << "row " << r;
  EXPECT_EQ(got[2], 2047u);
  EXPECT_EQ(got[3], 17000u);
  EXPECT_EQ(got[4], n - 1);
  EXPECT_EQ(got[5], 0u);
  EXPECT_EQ(got[6], 0u);
}

TEST_F(ArgmaxRows, RefusesBuffersShorterThanTheRows) {
  vk::Buffer in = device_buffer(std::vector<float>(100)), out = device_buffer(std::vector<uint32_t>(2));
  vk::Buffer scratch = device_buffer(std::vector<uint32_t>(256));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  EXPECT_THROW(argmax_rows(rec, k, in.view(0, 400), 2, 51, out.view(0, 8), scratch.view()), Error);
  EXPECT_THROW(argmax_rows(rec, k, in.view(), 3, 10, out.view(0, 8), scratch.view()), Error);
  EXPECT_THROW(argmax_rows(rec, k, in.view(), 2, 10, out.view(0, 8), scratch.view(0, 8)), Error);
  rec.end();
}

}  // namespace
}  // namespace kvtrie::kernels
