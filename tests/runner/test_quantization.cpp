// Dequantization of every tensor type against hand-built blocks. Each block is assembled byte by byte from
// GGML's documented layout, scales are written as literal fp16 bit patterns (never through the code under
// test), and the expected floats come from the format's formula written out here.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "runner/model/quantization.h"

namespace kvtrie {
namespace {

// fp16 bit patterns of the scales used below (sign | exponent | mantissa, worked out by hand).
constexpr uint16_t kHalfOne = 0x3c00;       // 1.0
constexpr uint16_t kHalfHalf = 0x3800;      // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;   // 0.25
constexpr uint16_t kHalfEighth = 0x3000;    // 0.125
constexpr uint16_t kHalfMinus1_5 = 0xbe00;  // -1.5

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xff);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> dequant(TensorType type, const std::vector<uint8_t>& bytes, uint64_t n) {
  EXPECT_EQ(bytes.size(), row_bytes(type, n));
  std::vector<float> out(n, -12345.0f);
  dequantize_row(type, bytes.data(), out.data(), n);
  return out;
}

TEST(Dequantize, F32CopiesBits) {
  const std::array<float, 3> v{1.5f, -0.0f, 3.0e-39f};
  std::vector<uint8_t> bytes(sizeof v);
  std::memcpy(bytes.data(), v.data(), sizeof v);
  const auto out = dequant(TensorType::F32, bytes, 3);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(std::memcmp(&out[i], &v[i], 4), 0) << i;
}

TEST(Dequantize, F16AndBF16ReadLittleEndianHalves) {
  std::vector<uint8_t> h(4);
  put16(h, 0, 0xc000);  // -2.0
  put16(h, 2, 0x3555);  // exponent 13, mantissa 0x155: 2^-2 * (1 + 341/1024)
  auto out = dequant(TensorType::F16, h, 2);
  EXPECT_EQ(out[0], -2.0f);
  EXPECT_EQ(out[1], 0.25f * (1.0f + 341.0f / 1024.0f));
  std::vector<uint8_t> b(4);
  put16(b, 0, 0x3fc0);  // bf16: 1.5
  put16(b, 2, 0xc2f7);  // bf16: -(2^6) * (1 + 0x77/128) = -123.5
  out = dequant(TensorType::BF16, b, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -123.5f);
}

TEST(Dequantize, Q8_0ScalesSignedBytes) {
  std::vector<uint8_t> b(2 * 34);
  put16(b, 0, kHalfHalf);
  put16(b, 34, kHalfMinus1_5);
  for (int j = 0; j < 32; ++j) {
    b[2 + j] = static_cast<uint8_t>(j * 8 - 128);  // int8: -128, -120, ..., 120
    b[36 + j] = static_cast<uint8_t>(j);           // int8: 0..31
  }
  const auto out = dequant(TensorType::Q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[j], 0.5f * static_cast<float>(j * 8 - 128)) << j;
    EXPECT_EQ(out[32 + j], -1.5f * static_cast<float>(j)) << j;
  }
}

TEST(Dequantize, Q4_0LowNibblesFirstHalfHighNibblesSecondHalf) {
  std::vector<uint8_t> b(18);
  put16(b, 0, kHalfHalf);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto out = dequant(TensorType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (static_cast<float>(j) - 8.0f) * 0.5f) << j;
    EXPECT_EQ(out[16 + j], (static_cast<float>(15 - j) - 8.0f) * 0.5f) << j;
  }
}

TEST(Dequantize, Q4_1AddsMin) {
  std::vector<uint8_t> b(20);
  put16(b, 0, kHalfQuarter);
  put16(b, 2, kHalfMinus1_5);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(((j * 3) % 16) | (((j * 5 + 1) % 16) << 4));
  const auto out = dequant(TensorType::Q4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], static_cast<float>((j * 3) % 16) * 0.25f - 1.5f) << j;
    EXPECT_EQ(out[16 + j], static_cast<float>((j * 5 + 1) % 16) * 0.25f - 1.5f) << j;
  }
}

// qh is a little-endian 32-bit mask: bit j is the fifth bit of element j.
constexpr uint32_t kFifthBits = 0xa5c30f69u;

TEST(Dequantize, Q5_0TakesFifthBitFromMask) {
  std::vector<uint8_t> b(22);
  put16(b, 0, kHalfHalf);
  for (int i = 0; i < 4; ++i) b[2 + i] = static_cast<uint8_t>(kFifthBits >> (8 * i));
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto out = dequant(TensorType::Q5_0, b, 32);
  for (int j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? j : 15 - (j - 16);
    const int q = nibble + 16 * static_cast<int>((kFifthBits >> j) & 1u);
    EXPECT_EQ(out[j], static_cast<float>(q - 16) * 0.5f) << j;
  }
  // Spot checks worked out by hand: element 0 has nibble 0 and bit 1 (0x...69 is odd): (16-16)*0.5.
  EXPECT_EQ(out[0], 0.0f);
  // Element 1: nibble 1, bit 0 -> (1-16)*0.5.
  EXPECT_EQ(out[1], -7.5f);
  // Element 31: nibble 0 (high nibble of byte 15), bit 1 (0xa5 top bit) -> 0.
  EXPECT_EQ(out[31], 0.0f);
}

TEST(Dequantize, Q5_1AddsMinToFiveBitLevels) {
  std::vector<uint8_t> b(24);
  put16(b, 0, kHalfEighth);
  put16(b, 2, kHalfOne);
  for (int i = 0; i < 4; ++i) b[4 + i] = static_cast<uint8_t>(kFifthBits >> (8 * i));
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(((j * 7) % 16) | ((j % 4) << 4));
  const auto out = dequant(TensorType::Q5_1, b, 32);
  for (int j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? (j * 7) % 16 : (j - 16) % 4;
    const int q = nibble + 16 * static_cast<int>((kFifthBits >> j) & 1u);
    EXPECT_EQ(out[j], static_cast<float>(q) * 0.125f + 1.0f) << j;
  }
}

// Q4_K / Q5_K: eight 6-bit scales and mins, distinct per sub-block, hand-packed into 12 bytes:
//   scales = {1, 5, 17, 33, 63, 40, 22, 9}, mins = {0, 3, 60, 18, 47, 16, 31, 2}
//   bytes 0-3:  scale[j] | (scale[j+4] >> 4) << 6 -> C1 85 51 21
//   bytes 4-7:  min[j]   | (min[j+4] >> 4) << 6   -> 80 43 7C 12
//   bytes 8-11: (scale[j+4] & 15) | (min[j+4] & 15) << 4 -> FF 08 F6 29
constexpr std::array<int, 8> kSubScales{1, 5, 17, 33, 63, 40, 22, 9};
constexpr std::array<int, 8> kSubMins{0, 3, 60, 18, 47, 16, 31, 2};
constexpr std::array<uint8_t, 12> kPackedScales{0xC1, 0x85, 0x51, 0x21, 0x80, 0x43,
                                                0x7C, 0x12, 0xFF, 0x08, 0xF6, 0x29};

TEST(Dequantize, Q4_KUnpacksSixBitScalesAndNibbleChunks) {
  std::vector<uint8_t> b(144);
  put16(b, 0, kHalfHalf);     // d
  put16(b, 2, kHalfQuarter);  // dmin
  std::copy(kPackedScales.begin(), kPackedScales.end(), b.begin() + 4);
  for (int i = 0; i < 128; ++i) b[16 + i] = static_cast<uint8_t>((i % 16) | (((i * 7 + i / 32) % 16) << 4));
  const auto out = dequant(TensorType::Q4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    // Element e lives in 64-chunk c; the first 32 of a chunk are low nibbles of bytes 32c.., the next 32
    // are the high nibbles of the same bytes.
    const int c = e / 64, l = e % 32;
    const int byte = 32 * c + l;
    const int q = (e % 64) < 32 ? byte % 16 : (byte * 7 + byte / 32) % 16;
    const int sub = e / 32;
    const float expected = 0.5f * static_cast<float>(kSubScales[sub]) * static_cast<float>(q) -
                           0.25f * static_cast<float>(kSubMins[sub]);
    EXPECT_EQ(out[e], expected) << e;
  }
  // Hand-worked: element 0 (q 0, sub 0) = -0.25*0; element 255 (byte 127 high nibble = (889+3)%16 = 12,
  // sub 7) = 0.5*9*12 - 0.25*2 = 53.5; element 128 (byte 64 low nibble 0, sub 4) = -0.25*47 = -11.75;
  // element 160 (byte 64 high nibble (448+2)%16 = 2, sub 5) = 0.5*40*2 - 0.25*16 = 36.
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[255], 53.5f);
  EXPECT_EQ(out[128], -11.75f);
  EXPECT_EQ(out[160], 36.0f);
}

TEST(Dequantize, Q5_KAddsFifthBitsFromQh) {
  std::vector<uint8_t> b(176);
  put16(b, 0, kHalfQuarter);  // d
  put16(b, 2, kHalfHalf);     // dmin
  std::copy(kPackedScales.begin(), kPackedScales.end(), b.begin() + 4);
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(l * 37 + 11);
  for (int i = 0; i < 128; ++i) b[48 + i] = static_cast<uint8_t>(((i * 5) % 16) | (((i + 3) % 16) << 4));
  const auto out = dequant(TensorType::Q5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, l = e % 32;
    const bool second = (e % 64) >= 32;
    const int byte = 32 * c + l;
    const int nibble = second ? (byte + 3) % 16 : (byte * 5) % 16;
    const int qh = static_cast<uint8_t>(l * 37 + 11);
    const int bit = (qh >> (2 * c + (second ? 1 : 0))) & 1;
    const int q = nibble + 16 * bit;
    const int sub = e / 32;
    const float expected = 0.25f * static_cast<float>(kSubScales[sub]) * static_cast<float>(q) -
                           0.5f * static_cast<float>(kSubMins[sub]);
    EXPECT_EQ(out[e], expected) << e;
  }
  // Hand-worked: element 0: nibble 0, qh[0] = 11 = 0b1011 bit 0 = 1 -> q 16, sub 0: 0.25*1*16 - 0 = 4.
  EXPECT_EQ(out[0], 4.0f);
  // Element 64 (chunk 1, first half, l 0): byte 32 nibble 160%16 = 0, qh[0] bit 2 = 0 -> q 0, sub 2: -30.
  EXPECT_EQ(out[64], -30.0f);
  // Element 96 (chunk 1, second half, l 0): byte 32 high nibble 35%16 = 3, qh[0] bit 3 = 1 -> q 19, sub 3:
  // 0.25*33*19 - 0.5*18 = 147.75.
  EXPECT_EQ(out[96], 147.75f);
  // Element 224 (chunk 3, second half, l 0): byte 96 high nibble 99%16 = 3, qh[0] bit 7 = 0 -> q 3,
  // sub 7: 0.25*9*3 - 0.5*2 = 5.75.
  EXPECT_EQ(out[224], 5.75f);
}

TEST(Dequantize, Q6_KLayoutSpotChecks) {
  // Only ql[0], ql[64], qh[0], qh[32] are non-zero, so every other element is level 0 (value -32*scale).
  std::vector<uint8_t> b(210);
  b[0] = 0x21;         // ql[0]: low nibble 1 (element 0), high nibble 2 (element 64)
  b[64] = 0x0f;        // ql[64]: low nibble 15 (element 128)
  b[128] = 0xe4;       // qh[0] = 0b11'10'01'00: elements 0, 32, 64, 96 get top bits 0, 1, 2, 3
  b[128 + 32] = 0x01;  // qh[32]: element 128 gets top bits 1
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(s + 1);  // scales 1..16
  put16(b, 208, kHalfOne);                                                // d at the END of the block
  const auto out = dequant(TensorType::Q6_K, b, 256);
  EXPECT_EQ(out[0], 1.0f * 1 * (1 - 32));          // q = 1
  EXPECT_EQ(out[32], 1.0f * 3 * (16 - 32));        // q = 0 | 1<<4, scale index 2
  EXPECT_EQ(out[64], 1.0f * 5 * (2 + 32 - 32));    // q = 2 | 2<<4, scale index 4
  EXPECT_EQ(out[96], 1.0f * 7 * (48 - 32));        // q = 0 | 3<<4, scale index 6
  EXPECT_EQ(out[128], 1.0f * 9 * (15 + 16 - 32));  // q = 15 | 1<<4, scale index 8
  EXPECT_EQ(out[1], 1.0f * 1 * -32);
  EXPECT_EQ(out[255], 1.0f * 16 * -32);
}

TEST(Dequantize, Q6_KFullPatternWithSignedScales) {
  std::vector<uint8_t> b(2 * 210);
  const std::array<int, 16> scales{-8, 7, 1, -1, 127, -128, 3, 64, -33, 12, 5, -7, 100, 2, -2, 0};
  for (int blk = 0; blk < 2; ++blk) {
    const size_t base = 210 * static_cast<size_t>(blk);
    for (int i = 0; i < 128; ++i) b[base + i] = static_cast<uint8_t>(i * 13 + blk);
    for (int i = 0; i < 64; ++i) b[base + 128 + i] = static_cast<uint8_t>(i * 29 + 7);
    for (int s = 0; s < 16; ++s) b[base + 192 + s] = static_cast<uint8_t>(static_cast<int8_t>(scales[s]));
    put16(b, base + 208, blk == 0 ? kHalfQuarter : kHalfMinus1_5);
  }
  const auto out = dequant(TensorType::Q6_K, b, 512);
  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk == 0 ? 0.25f : -1.5f;
    for (int e = 0; e < 256; ++e) {
      // e = 128h + 32k + l: low 4 bits from ql[64h + 32(k&1) + l] (low nibble for k < 2), top 2 bits from
      // bits 2k..2k+1 of qh[32h + l].
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int qlb = static_cast<uint8_t>((64 * h + 32 * (k & 1) + l) * 13 + blk);
      const int low = k < 2 ? qlb & 15 : qlb >> 4;
      const int qhb = static_cast<uint8_t>((32 * h + l) * 29 + 7);
      const int q = low | (((qhb >> (2 * k)) & 3) << 4);
      const float expected = d * static_cast<float>(scales[e / 16]) * static_cast<float>(q - 32);
      EXPECT_EQ(out[256 * blk + e], expected) << blk << ":" << e;
    }
  }
}

TEST(Dequantize, MultiBlockRowsAdvanceByBlockBytes) {
  // Three Q4_0 blocks with scales 1, 0.5, 0.25 and all nibbles 15: blocks must land in order.
  std::vector<uint8_t> b(3 * 18, 0xff);
  put16(b, 0, kHalfOne);
  put16(b, 18, kHalfHalf);
  put16(b, 36, kHalfQuarter);
  const auto out = dequant(TensorType::Q4_0, b, 96);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[j], 7.0f);
    EXPECT_EQ(out[32 + j], 3.5f);
    EXPECT_EQ(out[64 + j], 1.75f);
  }
}

TEST(Dequantize, RowNotWholeBlocksThrows) {
  std::vector<uint8_t> b(144);
  std::vector<float> out(300);
  EXPECT_THROW(dequantize_row(TensorType::Q4_K, b.data(), out.data(), 100), Error);
  EXPECT_THROW(quantize_row(TensorType::Q8_0, out.data(), b.data(), 33), Error);
}

}  // namespace
}  // namespace kvtrie
