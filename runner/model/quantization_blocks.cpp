// The 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1). Layouts, all little-endian:
//   Q8_0: fp16 d, int8 q[32]                      value = q * d
//   Q4_0: fp16 d, u8 qs[16]                       value = (nibble - 8) * d
//   Q4_1: fp16 d, fp16 m, u8 qs[16]               value = nibble * d + m
//   Q5_0: fp16 d, u32 qh, u8 qs[16]               value = (nibble | bit << 4) - 16) * d
//   Q5_1: fp16 d, fp16 m, u32 qh, u8 qs[16]       value = (nibble | bit << 4) * d + m
// qs[j] holds element j in its low nibble and element j + 16 in its high nibble; bit j of qh is the fifth
// bit of element j.
#include "runner/model/quantization_blocks.h"

#include <algorithm>
#include <cmath>

namespace kvtrie::quant_detail {

namespace {

constexpr int kBlock = 32;

int round_clamp(float v, int lo, int hi) {
  // nearbyint honours the default round-to-nearest-even mode, so results are the same on every host.
  return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

// The element with the largest magnitude, sign kept: symmetric types map it to the most negative level so
// the full asymmetric range (-8..7, -16..15) is used.
float signed_abs_max(const float* x, int count) {
  float best = 0.0f;
  float best_abs = 0.0f;
  for (int i = 0; i < count; ++i) {
    const float a = std::fabs(x[i]);
    if (a > best_abs) {
      best_abs = a;
      best = x[i];
    }
  }
  return best;
}

void min_max(const float* x, int count, float& lo, float& hi) {
  lo = x[0];
  hi = x[0];
  for (int i = 1; i < count; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, sizeof v);
}

// Packs 32 values of 0..15 into 16 bytes: element j low nibble, element j + 16 high nibble.
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
}

// Packs 32 values of 0..31: low nibbles as above, fifth bits into a 32-bit mask (bit j = element j).
void pack_five_bit(const uint8_t* q, uint8_t* qh, uint8_t* qs) {
  uint32_t high = 0;
  for (int j = 0; j < kBlock; ++j) high |= static_cast<uint32_t>((q[j] >> 4) & 1u) << j;
  store_u32(qh, high);
  pack_nibbles(q, qs);
}

// Unpacks 32 values of 0..31 (or 0..15 when qh is null).
void unpack(const uint8_t* qh, const uint8_t* qs, int* q) {
  const uint32_t high = qh ? load_u32(qh) : 0u;
  for (int j = 0; j < kBlock / 2; ++j) {
    q[j] = (qs[j] & 0xf) | static_cast<int>(((high >> j) & 1u) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((high >> (j + 16)) & 1u) << 4);
  }
}

// Symmetric types: value = (q - offset) * d, levels 0..2*offset-1.
void quantize_symmetric(const float* x, int offset, uint8_t* d_at, uint8_t* q) {
  const float d = store_half(d_at, signed_abs_max(x, kBlock) / static_cast<float>(-offset));
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock; ++j)
    q[j] = static_cast<uint8_t>(round_clamp(x[j] * inv, -offset, offset - 1) + offset);
}

// Affine types: value = q * d + m, levels 0..levels.
void quantize_affine(const float* x, int levels, uint8_t* d_at, uint8_t* m_at, uint8_t* q) {
  float lo, hi;
  min_max(x, kBlock, lo, hi);
  const float d = store_half(d_at, (hi - lo) / static_cast<float>(levels));
  const float m = store_half(m_at, lo);
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock; ++j) q[j] = static_cast<uint8_t>(round_clamp((x[j] - m) * inv, 0, levels));
}

}  // namespace

void dequantize_q8_0(const uint8_t* block, float* out) {
  const float d = load_half(block);
  for (int j = 0; j < kBlock; ++j) out[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

void quantize_q8_0(const float* in, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(in[j]));
  const float d = store_half(block, amax / 127.0f);
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock; ++j)
    block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(round_clamp(in[j] * inv, -127, 127)));
}

void dequantize_q4_0(const uint8_t* block, float* out) {
  const float d = load_half(block);
  int q[kBlock];
  unpack(nullptr, block + 2, q);
  for (int j = 0; j < kBlock; ++j) out[j] = static_cast<float>(q[j] - 8) * d;
}

void quantize_q4_0(const float* in, uint8_t* block) {
  uint8_t q[kBlock];
  quantize_symmetric(in, 8, block, q);
  pack_nibbles(q, block + 2);
}

void dequantize_q4_1(const uint8_t* block, float* out) {
  const float d = load_half(block);
  const float m = load_half(block + 2);
  int q[kBlock];
  unpack(nullptr, block + 4, q);
  for (int j = 0; j < kBlock; ++j) out[j] = static_cast<float>(q[j]) * d + m;
}

void quantize_q4_1(const float* in, uint8_t* block) {
  uint8_t q[kBlock];
  quantize_affine(in, 15, block, block + 2, q);
  pack_nibbles(q, block + 4);
}

void dequantize_q5_0(const uint8_t* block, float* out) {
  const float d = load_half(block);
  int q[kBlock];
  unpack(block + 2, block + 6, q);
  for (int j = 0; j < kBlock; ++j) out[j] = static_cast<float>(q[j] - 16) * d;
}

void quantize_q5_0(const float* in, uint8_t* block) {
  uint8_t q[kBlock];
  quantize_symmetric(in, 16, block, q);
  pack_five_bit(q, block + 2, block + 6);
}

void dequantize_q5_1(const uint8_t* block, float* out) {
  const float d = load_half(block);
  const float m = load_half(block + 2);
  int q[kBlock];
  unpack(block + 4, block + 8, q);
  for (int j = 0; j < kBlock; ++j) out[j] = static_cast<float>(q[j]) * d + m;
}

void quantize_q5_1(const float* in, uint8_t* block) {
  uint8_t q[kBlock];
  quantize_affine(in, 31, block, block + 2, q);
  pack_five_bit(q, block + 4, block + 8);
}

}  // namespace kvtrie::quant_detail
