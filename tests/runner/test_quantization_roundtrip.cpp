// quantize_row -> dequantize_row on seeded random rows of several blocks, for every type, within a stated
// relative RMS error bound per type. Also: values already on a type's grid come back exactly, zero rows stay
// zero, and quantization is deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "runner/model/quantization.h"

namespace kvtrie {
namespace {

struct Bound {
  TensorType type;
  double max_rel_rms;  // RMS(error) / RMS(signal) on Gaussian data
};

// Expected levels: a b-bit uniform quantizer over a block's range (about 5 sigma for 32 Gaussian values)
// has RMS error step/sqrt(12). Measured means (F16 2.0e-4, BF16 1.7e-3, Q8_0 .0052, Q4_0 .085, Q4_1 .078,
// Q5_0 .042, Q5_1 .038, Q4_K .079, Q5_K .039, Q6_K .019) vary by a few percent between seeds; the bounds
// leave about 30% headroom.
constexpr Bound kBounds[] = {
    {TensorType::F32, 0.0},     {TensorType::F16, 3e-4},   {TensorType::BF16, 2.5e-3},
    {TensorType::Q8_0, 0.0075}, {TensorType::Q4_0, 0.110}, {TensorType::Q4_1, 0.100},
    {TensorType::Q5_0, 0.055},  {TensorType::Q5_1, 0.050}, {TensorType::Q4_K, 0.105},
    {TensorType::Q5_K, 0.052},  {TensorType::Q6_K, 0.026},
};

uint64_t fresh_seed() {
  return std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
}

// Gaussian values whose scale changes per 256-element super-block (x 1/4 .. x 4) and, more mildly, per
// 32-element sub-block (x 1 .. x 2.5, as real weight rows do), so a block written to the wrong place or
// with another block's scale shows up as a large error.
std::vector<float> random_row(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(n);
  for (uint64_t i = 0; i < n; ++i) {
    const float super_scale = std::ldexp(1.0f, static_cast<int>((i / 256) % 5) - 2);
    const float sub_scale = 1.0f + 0.5f * static_cast<float>((i / 32) % 4);
    row[i] = normal(rng) * super_scale * sub_scale;
  }
  return row;
}

std::vector<float> round_trip(TensorType type, const std::vector<float>& row) {
  std::vector<uint8_t> bytes(row_bytes(type, row.size()));
  quantize_row(type, row.data(), bytes.data(), row.size());
  std::vector<float> back(row.size());
  dequantize_row(type, bytes.data(), back.data(), row.size());
  return back;
}

// Relative RMS error, measured per 32-element stretch (each stretch has its own scale) and averaged.
double rel_rms(const std::vector<float>& ref, const std::vector<float>& got) {
  double total = 0;
  size_t stretches = 0;
  for (size_t start = 0; start < ref.size(); start += 32, ++stretches) {
    double err = 0, sig = 0;
    for (size_t i = start; i < start + 32; ++i) {
      err += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
      sig += static_cast<double>(ref[i]) * ref[i];
    }
    total += std::sqrt(err / sig);
  }
  return total / static_cast<double>(stretches);
}

class RoundTrip : public ::testing::TestWithParam<Bound> {};

TEST_P(RoundTrip, RelativeRmsErrorWithinBound) {
  const Bound bound = GetParam();
  const uint64_t seed = fresh_seed();
  // 7 super-blocks (1792 values): several blocks of every type, an odd count.
  const auto row = random_row(7 * 256, seed);
  const auto back = round_trip(bound.type, row);
  const double err = rel_rms(row, back);
  EXPECT_LE(err, bound.max_rel_rms) << tensor_type_info(bound.type).name << " seed " << seed;
  if (bound.type != TensorType::F32) {
    EXPECT_GT(err, 0.0) << tensor_type_info(bound.type).name << " lost no precision; is it a copy?";
  }
}

TEST_P(RoundTrip, ZeroRowStaysZero) {
  const std::vector<float> zeros(512, 0.0f);
  for (float v : round_trip(GetParam().type, zeros)) ASSERT_EQ(v, 0.0f);
}

TEST_P(RoundTrip, Deterministic) {
  const TensorType type = GetParam().type;
  const uint64_t seed = fresh_seed();
  const auto row = random_row(1024, seed);
  std::vector<uint8_t> a(row_bytes(type, row.size())), b(a.size(), 0xaa);
  quantize_row(type, row.data(), a.data(), row.size());
  quantize_row(type, row.data(), b.data(), row.size());
  EXPECT_EQ(a, b) << "seed " << seed;
}

TEST_P(RoundTrip, QuantizingDequantizedRowIsStable) {
  // Values already produced by dequantize lie on the grid; quantizing them again must not drift far.
  const TensorType type = GetParam().type;
  const uint64_t seed = fresh_seed();
  const auto once = round_trip(type, random_row(768, seed));
  const auto twice = round_trip(type, once);
  EXPECT_LE(rel_rms(once, twice), GetParam().max_rel_rms * 0.5 + 1e-7) << "seed " << seed;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(kBounds),
                         [](const ::testing::TestParamInfo<Bound>& param_info) {
                           return std::string(tensor_type_info(param_info.param.type).name);
                         });

TEST(RoundTripExact, Q4_0GridValuesComeBackExactly) {
  // (k - 8) * 0.5 for k in 0..15, with -4 present so the block scale is exactly 0.5.
  std::vector<float> row(64);
  for (int i = 0; i < 64; ++i) row[i] = (static_cast<float>((i * 7) % 16) - 8.0f) * 0.5f;
  EXPECT_EQ(round_trip(TensorType::Q4_0, row), row);
}

TEST(RoundTripExact, Q8_0IntegerRowComesBackExactly) {
  std::vector<float> row(32);
  for (int i = 0; i < 32; ++i) row[i] = static_cast<float>(127 - 8 * i);  // amax 127 -> d = 1
  EXPECT_EQ(round_trip(TensorType::Q8_0, row), row);
}

TEST(RoundTripExact, Q4_KSmallIntegersComeBackExactly) {
  // Every sub-block spans 0..15 with min 0, so each sub-block scale is 1 = 63 * d with d = fp16(1/63).
  // fp16 cannot hold 1/63 exactly, so the values come back within 15 * 63 * |d - 1/63|, not bit-exact.
  std::vector<float> row(256);
  for (int i = 0; i < 256; ++i) row[i] = static_cast<float>(i % 16);
  const auto back = round_trip(TensorType::Q4_K, row);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(back[i], row[i], 0.01f) << i;
}

}  // namespace
}  // namespace kvtrie
