// fp16 / bf16 conversions: edge cases with bit patterns worked out by hand, plus an exhaustive check of
// every fp16 value against the IEEE formula sign * 2^(e-15) * (1 + m/1024).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runner/model/quantization.h"

namespace kvtrie {
namespace {

bool half_is_nan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}
bool bf16_is_nan(uint16_t h) {
  return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

TEST(Fp16, EncodesSpecialValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);                  // largest finite half
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(half_is_nan(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload sits only in the low 13 bits must not collapse into infinity.
  EXPECT_TRUE(half_is_nan(fp32_to_fp16(std::bit_cast<float>(0x7f800001u))));
  EXPECT_TRUE(half_is_nan(fp32_to_fp16(std::bit_cast<float>(0xff800001u))));
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(Fp16, OverflowRoundsToInfinity) {
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);  // just under the halfway point to 2^16
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);    // tie with odd 0x7bff: goes to even, i.e. 2^16 = inf
  EXPECT_EQ(fp32_to_fp16(1.0e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1.0e10f), 0xfc00);
}

TEST(Fp16, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);                          // spacing of halves in [1, 2)
  EXPECT_EQ(fp32_to_fp16(1.0f + 0.5f * ulp), 0x3c00);               // tie, 0x3c00 is even
  EXPECT_EQ(fp32_to_fp16(1.0f + 1.5f * ulp), 0x3c02);               // tie, 0x3c02 is even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0.5f * ulp + ulp / 1024), 0x3c01);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(1.0f + 0.5f * ulp - ulp / 1024), 0x3c00);  // just below
  EXPECT_EQ(fp32_to_fp16(2.0f - 0.5f * ulp), 0x4000);               // tie carries into the exponent
  // Subnormal range, unit 2^-24.
  const float unit = std::ldexp(1.0f, -24);
  EXPECT_EQ(fp32_to_fp16(0.5f * unit), 0x0000);  // tie with 0
  EXPECT_EQ(fp32_to_fp16(0.5f * unit * 1.001f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(1.5f * unit), 0x0002);  // tie between 1 and 2
  EXPECT_EQ(fp32_to_fp16(2.5f * unit), 0x0002);  // tie between 2 and 3
  EXPECT_EQ(fp32_to_fp16(-2.5f * unit), 0x8002);
  EXPECT_EQ(fp32_to_fp16(1023.5f * unit), 0x0400);  // tie rounds up into the smallest normal
}

TEST(Fp16, DecodesEveryBitPatternPerFormula) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float got = fp16_to_fp32(h);
    const int exp = (bits >> 10) & 31;
    const int mant = bits & 0x3ff;
    const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
    if (exp == 31) {
      if (mant == 0) {
        EXPECT_EQ(got, sign * std::numeric_limits<float>::infinity()) << std::hex << bits;
      } else {
        EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
      }
      continue;
    }
    const float expected = exp == 0 ? sign * std::ldexp(static_cast<float>(mant), -24)
                                    : sign * std::ldexp(1.0f + static_cast<float>(mant) / 1024.0f, exp - 15);
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected)) << std::hex << bits;
    // Every finite half survives the round trip bit for bit (including -0).
    ASSERT_EQ(fp32_to_fp16(got), h) << std::hex << bits;
  }
}

TEST(Bf16, EncodesAndRounds) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(0.0f), 0x0000);
  const float ulp = std::ldexp(1.0f, -7);              // spacing of bf16 in [1, 2)
  EXPECT_EQ(fp32_to_bf16(1.0f + 0.5f * ulp), 0x3f80);  // tie to even
  EXPECT_EQ(fp32_to_bf16(1.0f + 1.5f * ulp), 0x3f82);  // tie to even
  EXPECT_EQ(fp32_to_bf16(1.0f + 0.5f * ulp + ulp / 256), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the largest bf16
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(bf16_is_nan(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16_is_nan(fp32_to_bf16(std::bit_cast<float>(0x7f800001u))));  // payload only in low bits
  EXPECT_EQ(fp32_to_bf16(std::ldexp(1.0f, -130)), 0x0008);  // float subnormal 2^-130 is exact in bf16
  EXPECT_EQ(bf16_to_fp32(0x0008), std::ldexp(1.0f, -130));
  EXPECT_EQ(bf16_to_fp32(0xc2f7), -123.5f);
  EXPECT_EQ(bf16_to_fp32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7fc0)));
}

TEST(Bf16, EveryPatternRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    if (bf16_is_nan(h)) continue;
    ASSERT_EQ(fp32_to_bf16(bf16_to_fp32(h)), h) << std::hex << bits;
  }
}

}  // namespace
}  // namespace kvtrie
