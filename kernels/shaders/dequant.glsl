// Block decoders for every tensor type, shared by get_rows and the matrix shaders. Owner: vk (mm may add).
//
// Usage: declare the quantized data as 32-bit words and name it before including this file:
//     layout(binding = N) readonly buffer Q { uint q_words[]; };
//     #define QBUF q_words
//     #define TYPE_Q4_0            (one of TYPE_F32 TYPE_F16 TYPE_BF16 TYPE_Q8_0 TYPE_Q4_0 TYPE_Q4_1
//                                   TYPE_Q5_0 TYPE_Q5_1 TYPE_Q4_K TYPE_Q5_K TYPE_Q6_K; usually from glslc -D)
//     #include "dequant.glsl"
// Then: QK (values per block), QBLOCK_BYTES (bytes per block), and
//     float dequant_value(uint row_byte, uint i)   value i of a row that starts at byte row_byte.
// Rows and blocks need not be 4-byte aligned: every read goes through q_u8/q_u16 byte addressing, which
// needs nothing beyond core Vulkan 1.2 (no 8/16-bit storage). Layouts are GGML's (little-endian).
#ifndef KVTRIE_DEQUANT_GLSL
#define KVTRIE_DEQUANT_GLSL

uint q_u8(uint b) { return (QBUF[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint q_u16(uint b) { return q_u8(b) | (q_u8(b + 1u) << 8); }
uint q_u32(uint b) { return q_u16(b) | (q_u16(b + 2u) << 16); }
int q_i8(uint b) { return int(q_u8(b) << 24) >> 24; }
float q_f16(uint b) { return unpackHalf2x16(q_u16(b)).x; }

#if defined(TYPE_F32)
#define QK 1u
#define QBLOCK_BYTES 4u
float dequant_value(uint row_byte, uint i) { return uintBitsToFloat(q_u32(row_byte + 4u * i)); }

#elif defined(TYPE_F16)
#define QK 1u
#define QBLOCK_BYTES 2u
float dequant_value(uint row_byte, uint i) { return q_f16(row_byte + 2u * i); }

#elif defined(TYPE_BF16)
#define QK 1u
#define QBLOCK_BYTES 2u
float dequant_value(uint row_byte, uint i) { return uintBitsToFloat(q_u16(row_byte + 2u * i) << 16); }

#elif defined(TYPE_Q8_0)
// {f16 d; int8 q[32]}: x = d * q
#define QK 32u
#define QBLOCK_BYTES 34u
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  return q_f16(b) * float(q_i8(b + 2u + i % QK));
}

#elif defined(TYPE_Q4_0)
// {f16 d; u8 qs[16]}: value j<16 is the low nibble of qs[j], j>=16 the high nibble of qs[j-16]; x = d*(q-8)
#define QK 32u
#define QBLOCK_BYTES 18u
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  uint j = i % QK;
  uint q = (q_u8(b + 2u + (j & 15u)) >> ((j >> 4) * 4u)) & 15u;
  return q_f16(b) * (float(q) - 8.0);
}

#elif defined(TYPE_Q4_1)
// {f16 d; f16 m; u8 qs[16]}: x = d*q + m
#define QK 32u
#define QBLOCK_BYTES 20u
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  uint j = i % QK;
  uint q = (q_u8(b + 4u + (j & 15u)) >> ((j >> 4) * 4u)) & 15u;
  return q_f16(b) * float(q) + q_f16(b + 2u);
}

#elif defined(TYPE_Q5_0)
// {f16 d; u8 qh[4]; u8 qs[16]}: 5th bit of value j is bit j of qh; x = d*(q-16)
#define QK 32u
#define QBLOCK_BYTES 22u
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  uint j = i % QK;
  uint lo = (q_u8(b + 6u + (j & 15u)) >> ((j >> 4) * 4u)) & 15u;
  uint hi = (q_u32(b + 2u) >> j) & 1u;
  return q_f16(b) * (float(lo | (hi << 4)) - 16.0);
}

#elif defined(TYPE_Q5_1)
// {f16 d; f16 m; u8 qh[4]; u8 qs[16]}: x = d*q + m
#define QK 32u
#define QBLOCK_BYTES 24u
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  uint j = i % QK;
  uint lo = (q_u8(b + 8u + (j & 15u)) >> ((j >> 4) * 4u)) & 15u;
  uint hi = (q_u32(b + 4u) >> j) & 1u;
  return q_f16(b) * float(lo | (hi << 4)) + q_f16(b + 2u);
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Super-block of 256 = 8 sub-blocks of 32, each with a 6-bit scale and min packed in scales[12]:
// Q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}
// Q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
// Sub-blocks 2c and 2c+1 share qs[32c .. 32c+32): low nibbles, then high nibbles. Q5_K's 5th bit of value
// l of sub-block s is bit s of qh[l]. x = d*scale*q - dmin*min.
#define QK 256u
#if defined(TYPE_Q4_K)
#define QBLOCK_BYTES 144u
#define QS_OFFSET 16u
#else
#define QBLOCK_BYTES 176u
#define QS_OFFSET 48u
#endif
// scale (x) and min (y) of sub-block s (0..7) of the super-block at byte b
uvec2 k_scale_min(uint b, uint s) {
  uint sc = b + 4u;
  if (s < 4u) return uvec2(q_u8(sc + s) & 63u, q_u8(sc + s + 4u) & 63u);
  uint packed = q_u8(sc + s + 4u);
  return uvec2((packed & 15u) | ((q_u8(sc + s - 4u) >> 6) << 4), (packed >> 4) | ((q_u8(sc + s) >> 6) << 4));
}
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  uint j = i % QK;
  uint s = j / 32u;
  uint l = j % 32u;
  uint q = (q_u8(b + QS_OFFSET + 32u * (s / 2u) + l) >> ((s & 1u) * 4u)) & 15u;
#if defined(TYPE_Q5_K)
  q |= ((q_u8(b + 16u + l) >> s) & 1u) << 4;
#endif
  uvec2 sm = k_scale_min(b, s);
  return q_f16(b) * float(sm.x) * float(q) - q_f16(b + 2u) * float(sm.y);
}

#elif defined(TYPE_Q6_K)
// {u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d}: two halves of 128 values; in half n, value 32*k + l
// (k = 0..3, l = 0..31) has low 4 bits from ql[64n + l + 32*(k&1)] (low nibble for k<2, high for k>=2),
// high 2 bits from qh[32n + l] >> 2k, and scale scales[8n + l/16 + 2k]. x = d*scale*(q-32)
#define QK 256u
#define QBLOCK_BYTES 210u
float dequant_value(uint row_byte, uint i) {
  uint b = row_byte + (i / QK) * QBLOCK_BYTES;
  uint j = i % QK;
  uint n = j / 128u;
  uint k = (j % 128u) / 32u;
  uint l = j % 32u;
  uint lo = (q_u8(b + 64u * n + l + 32u * (k & 1u)) >> ((k / 2u) * 4u)) & 15u;
  uint hi = (q_u8(b + 128u + 32u * n + l) >> (2u * k)) & 3u;
  int q = int(lo | (hi << 4)) - 32;
  float scale = float(q_i8(b + 192u + 8u * n + l / 16u + 2u * k));
  return q_f16(b + 208u) * scale * float(q);
}

#else
#error "dequant.glsl: define one TYPE_* before including"
#endif

#endif  // KVTRIE_DEQUANT_GLSL
