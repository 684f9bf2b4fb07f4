// The 256-element "K" super-block types. Layouts, all little-endian:
//   Q4_K (144 B): fp16 d, fp16 dmin, u8 scales[12], u8 qs[128]
//   Q5_K (176 B): fp16 d, fp16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
//   Q6_K (210 B): u8 ql[128], u8 qh[64], int8 scales[16], fp16 d
// Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scale sc[s] and min mn[s]; value = d*sc*q - dmin*mn. Each
// 64-element chunk c uses qs[32c .. 32c+31]: low nibbles are elements 64c..64c+31 (sub-block 2c), high
// nibbles are elements 64c+32.. (sub-block 2c+1). Q5_K's fifth bit of element 64c+l is bit 2c of qh[l], of
// element 64c+32+l bit 2c+1. The 12 scale bytes: for s < 4, bytes s and s+4 hold sc[s] and mn[s] in their low
// 6 bits; for s >= 4, byte s+4 holds sc[s] & 15 (low nibble) and mn[s] & 15 (high nibble), and the top 2 bits
// of sc[s] / mn[s] go to the top 2 bits of bytes s-4 / s. Q6_K: 16 sub-blocks of 16 with int8 scales; value =
// d*scale[e/16]*(q - 32), q in 0..63. Element e = 128h + 32k + l (h < 2, k < 4, l < 32) keeps its low 4 bits
// in ql[64h + 32(k&1) + l] (low nibble for k < 2, high nibble otherwise) and its top 2 bits in bits 2k..2k+1
// of qh[32h + l].
#include <algorithm>
#include <cmath>

#include "runner/model/quantization_blocks.h"

namespace kvtrie::quant_detail {

namespace {

constexpr int kSuper = 256;

int round_clamp(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

void unpack_scale_min(const uint8_t* s, int sub, int& scale, int& min) {
  if (sub < 4) {
    scale = s[sub] & 63;
    min = s[sub + 4] & 63;
  } else {
    scale = (s[sub + 4] & 0xf) | ((s[sub - 4] >> 6) << 4);
    min = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
  }
}

void pack_scales_mins(const uint8_t* scale, const uint8_t* min, uint8_t* s) {
  for (int sub = 0; sub < 4; ++sub) {
    s[sub] = static_cast<uint8_t>((scale[sub] & 63) | ((scale[sub + 4] >> 4) << 6));
    s[sub + 4] = static_cast<uint8_t>((min[sub] & 63) | ((min[sub + 4] >> 4) << 6));
    s[sub + 8] = static_cast<uint8_t>((scale[sub + 4] & 0xf) | ((min[sub + 4] & 0xf) << 4));
  }
}

// Shared by Q4_K (levels 15) and Q5_K (levels 31): picks each sub-block's scale and min from its range
// (min clamped to <= 0, since the format subtracts a non-negative min), quantizes those to 6 bits against
// the super-block's d / dmin, then rounds every element against its sub-block's effective scale.
void quantize_k_affine(const float* x, int levels, uint8_t* block, uint8_t* q) {
  float sub_scale[8];
  float sub_min[8];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int sub = 0; sub < 8; ++sub) {
    const float* v = x + 32 * sub;
    float lo = v[0];
    float hi = v[0];
    for (int i = 1; i < 32; ++i) {
      lo = std::min(lo, v[i]);
      hi = std::max(hi, v[i]);
    }
    lo = std::min(lo, 0.0f);
    sub_scale[sub] = (hi - lo) / static_cast<float>(levels);
    sub_min[sub] = -lo;
    max_scale = std::max(max_scale, sub_scale[sub]);
    max_min = std::max(max_min, sub_min[sub]);
  }
  const float d = store_half(block, max_scale / 63.0f);
  const float dmin = store_half(block + 2, max_min / 63.0f);
  const float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
  const float inv_dmin = dmin > 0.0f ? 1.0f / dmin : 0.0f;
  uint8_t ls[8];
  uint8_t lm[8];
  for (int sub = 0; sub < 8; ++sub) {
    ls[sub] = static_cast<uint8_t>(round_clamp(sub_scale[sub] * inv_d, 0, 63));
    lm[sub] = static_cast<uint8_t>(round_clamp(sub_min[sub] * inv_dmin, 0, 63));
    const float eff_scale = d * static_cast<float>(ls[sub]);
    const float eff_min = dmin * static_cast<float>(lm[sub]);
    const float inv = eff_scale > 0.0f ? 1.0f / eff_scale : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const int e = 32 * sub + i;
      q[e] = static_cast<uint8_t>(round_clamp((x[e] + eff_min) * inv, 0, levels));
    }
  }
  pack_scales_mins(ls, lm, block + 4);
}

void dequantize_k_affine(const uint8_t* block, const int* q, float* out) {
  const float d = load_half(block);
  const float dmin = load_half(block + 2);
  for (int sub = 0; sub < 8; ++sub) {
    int sc, mn;
    unpack_scale_min(block + 4, sub, sc, mn);
    const float scale = d * static_cast<float>(sc);
    const float min = dmin * static_cast<float>(mn);
    for (int i = 0; i < 32; ++i) out[32 * sub + i] = scale * static_cast<float>(q[32 * sub + i]) - min;
  }
}

}  // namespace

void dequantize_q4_k(const uint8_t* block, float* out) {
  const uint8_t* qs = block + 16;
  int q[kSuper];
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = qs[32 * c + l] & 0xf;
      q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
    }
  dequantize_k_affine(block, q, out);
}

void quantize_q4_k(const float* in, uint8_t* block) {
  uint8_t q[kSuper];
  quantize_k_affine(in, 15, block, q);
  uint8_t* qs = block + 16;
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

void dequantize_q5_k(const uint8_t* block, float* out) {
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48;
  int q[kSuper];
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = (qs[32 * c + l] & 0xf) | (((qh[l] >> (2 * c)) & 1) << 4);
      q[64 * c + 32 + l] = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
    }
  dequantize_k_affine(block, q, out);
}

void quantize_q5_k(const float* in, uint8_t* block) {
  uint8_t q[kSuper];
  quantize_k_affine(in, 31, block, q);
  uint8_t* qh = block + 16;
  uint8_t* qs = block + 48;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l];
      const int hi = q[64 * c + 32 + l];
      qs[32 * c + l] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
      qh[l] = static_cast<uint8_t>(qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
}

void dequantize_q6_k(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = load_half(block + 208);
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * h + 32 * k + l;
        const int low = (ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0xf;
        const int high = (qh[32 * h + l] >> (2 * k)) & 3;
        const float scale = d * static_cast<float>(scales[e / 16]);
        out[e] = scale * static_cast<float>((low | (high << 4)) - 32);
      }
}

void quantize_q6_k(const float* in, uint8_t* block) {
  // Each sub-block maps its largest-magnitude element to level -32 (the range is -32..31); the super-block
  // scale maps the largest-magnitude sub-block scale to -128 in int8.
  float sub_scale[16];
  float widest = 0.0f;
  for (int sub = 0; sub < 16; ++sub) {
    float best = 0.0f;
    for (int i = 0; i < 16; ++i)
      if (std::fabs(in[16 * sub + i]) > std::fabs(best)) best = in[16 * sub + i];
    sub_scale[sub] = best / -32.0f;
    if (std::fabs(sub_scale[sub]) > std::fabs(widest)) widest = sub_scale[sub];
  }
  const float d = store_half(block + 208, widest / -128.0f);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  auto* scales = reinterpret_cast<int8_t*>(block + 192);
  std::memset(block, 0, 192);
  uint8_t q[kSuper];
  for (int sub = 0; sub < 16; ++sub) {
    scales[sub] = static_cast<int8_t>(round_clamp(sub_scale[sub] * inv_d, -128, 127));
    const float eff = d * static_cast<float>(scales[sub]);
    const float inv = eff != 0.0f ? 1.0f / eff : 0.0f;
    for (int i = 0; i < 16; ++i)
      q[16 * sub + i] = static_cast<uint8_t>(round_clamp(in[16 * sub + i] * inv, -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int v = q[128 * h + 32 * k + l];
        uint8_t& low = ql[64 * h + 32 * (k & 1) + l];
        low = static_cast<uint8_t>(low | ((v & 0xf) << (4 * (k >> 1))));
        qh[32 * h + l] = static_cast<uint8_t>(qh[32 * h + l] | ((v >> 4) << (2 * k)));
      }
}

}  // namespace kvtrie::quant_detail
