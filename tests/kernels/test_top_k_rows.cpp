// top_k_rows: each row's k best (index, value) pairs are a full sort's first k in Sampler's rank order
// (larger value first, the lower index among equal ones, NaN read as -inf), over rows of one chunk or many
// (the merge then takes several windows), k from 1 (the argmax) to kTopKRowsMax, several rows at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <span>

#include "base/error.h"
#include "kernels/ops/top_k_rows.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class TopKRows : public test::VulkanTest {
 protected:
  // Runs top_k_rows over `values` and checks every row against a full sort.
  void expect_sorted_prefix(const std::vector<float>& values, uint32_t rows, uint32_t n, uint32_t k) {
    vk::Buffer in = device_buffer(values);
    vk::Buffer ids = device_buffer(std::vector<uint32_t>(uint64_t{rows} * k, 12345u));
    vk::Buffer best = device_buffer(std::vector<float>(uint64_t{rows} * k, 7.0f));
    vk::Buffer scratch = device_buffer(std::vector<uint32_t>(top_k_rows_scratch_bytes(rows, n, k) / 4));
    Kernels kernels(context(), Prewarm::No);
    vk::CommandRecorder rec(context());
    rec.begin();
    top_k_rows(rec, kernels, in.view(), rows, n, k, ids.view(), best.view(), scratch.view());
    rec.end();
    rec.submit_and_wait();
    const std::vector<uint32_t> got_ids = read_back<uint32_t>(ids, uint64_t{rows} * k);
    const std::vector<float> got_values = read_back<float>(best, uint64_t{rows} * k);
    for (uint32_t r = 0; r < rows; ++r) {
      const float* row = values.data() + uint64_t{r} * n;
      const auto sanitized = [&](uint32_t i) {
        return std::isnan(row[i]) ? -std::numeric_limits<float>::infinity() : row[i];
      };
      std::vector<uint32_t> order(n);
      std::iota(order.begin(), order.end(), 0u);
      std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        return sanitized(a) != sanitized(b) ? sanitized(a) > sanitized(b) : a < b;
      });
      for (uint32_t i = 0; i < k; ++i) {
        ASSERT_EQ(got_ids[uint64_t{r} * k + i], order[i]) << "row " << r << ", rank " << i << " of k " << k;
        const float want = sanitized(order[i]), got = got_values[uint64_t{r} * k + i];
        EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << "row " << r << ", rank " << i << ": " << got;
      }
    }
  }
};

TEST_F(TopKRows, EachRowGetsAFullSortsFirstK) {
  const uint32_t n = 20011, rows = 6;
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(12);
  std::vector<float> values(uint64_t{rows} * n);
  for (float& v : values) v = static_cast<float>(rng() % 256) * 0.25f - 32.0f;  // many ties
  for (int i = 0; i < 300; ++i) values[rng() % values.size()] = std::nanf("");
  for (int i = 0; i < 300; ++i) values[rng() % values.size()] = -inf;
  for (uint32_t c : {0u, 2047u, 2048u, 9000u, 20010u}) values[2 * n + c] = 50.0f;  // ties across chunks
  values[3 * n + n - 1] = inf;                                                     // +inf in the last place
  for (uint32_t i = 0; i < n; ++i) values[4 * n + i] = i % 2 ? -inf : std::nanf("");  // all masked
  for (uint32_t i = 0; i < n; ++i) values[5 * n + i] = i % 3 ? -0.0f : 0.0f;          // zeros of both signs
  for (uint32_t k : {1u, 40u, 64u, kTopKRowsMax}) expect_sorted_prefix(values, rows, n, k);
}

TEST_F(TopKRows, AVocabularyOf128KTakesSeveralMergeWindows) {
  const uint32_t n = 128256, rows = 2;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(uint64_t{rows} * n);
  for (float& v : values) v = normal(rng);
  for (uint32_t k : {64u, kTopKRowsMax}) expect_sorted_prefix(values, rows, n, k);  // 63 chunks
}

TEST_F(TopKRows, ARowShorterThanAChunkOrThanTwoK) {
  std::mt19937 rng(14);
  std::vector<float> values(3 * 70);
  for (float& v : values) v = static_cast<float>(rng() % 9);
  expect_sorted_prefix(values, 3, 70, 64);
  expect_sorted_prefix(values, 3, 70, 70);
}

TEST_F(TopKRows, RefusesBadArguments) {
  vk::Buffer in = device_buffer(std::vector<float>(100)), out = device_buffer(std::vector<uint32_t>(64));
  vk::Buffer scratch = device_buffer(std::vector<uint32_t>(4096));
  Kernels kernels(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  EXPECT_THROW(top_k_rows(rec, kernels, in.view(0, 400), 2, 51, 8, out.view(), out.view(), scratch.view()),
               Error);
  EXPECT_THROW(top_k_rows(rec, kernels, in.view(), 2, 50, 51, out.view(), out.view(), scratch.view()), Error);
  EXPECT_THROW(top_k_rows(rec, kernels, in.view(), 2, 50, 0, out.view(), out.view(), scratch.view()), Error);
  EXPECT_THROW(top_k_rows(rec, kernels, in.view(), 2, 50, 40, out.view(0, 8), out.view(), scratch.view()),
               Error);
  EXPECT_THROW(top_k_rows(rec, kernels, in.view(), 2, 50, 8, out.view(), out.view(), scratch.view(0, 16)),
               Error);
  rec.end();
}

}  // namespace
}  // namespace kvtrie::kernels
