// 16 consecutive weights of a row as f16 pairs, for the tensor-core tiles of matmul_coopmat.comp: the
// device formats (Q4_0x8, Q8_0x8, Q6_Kx8, kernels/ops/weight_format.h) and Q4_K/Q5_K, whose rows are
// 16-byte aligned, so each piece takes one or two 16-byte loads. A byte b becomes the f16 1024 + b by
// setting its exponent bits (exact for b < 1024), two bytes per instruction; the offset and scale follow
// in f16 pair arithmetic. The includer declares `readonly buffer { uvec4 w4[]; }` and defines WTYPE.

// Bytes 0, 1 and bytes 2, 3 of w as the f16 pairs (1024 + byte).
f16vec2 bytes01(uint w) { return unpackFloat2x16((w & 0xFFu) | ((w << 8) & 0xFF0000u) | 0x64006400u); }
f16vec2 bytes23(uint w) { return unpackFloat2x16(((w >> 16) & 0xFFu) | ((w >> 8) & 0xFF0000u) | 0x64006400u); }

// The 16 bytes of b (values 0..255 each) as 8 pairs (v - bias) * scale: v - bias is exact in f16, the
// product rounds once, as an f16 of the f32 value would.
void bytes_to_pairs(uvec4 b, float16_t bias, float16_t scale, out f16vec2 v[8]) {
  [[unroll]] for (uint m = 0u; m < 4u; ++m) {
    v[2u * m] = (bytes01(b[m]) - f16vec2(bias)) * scale;
    v[2u * m + 1u] = (bytes23(b[m]) - f16vec2(bias)) * scale;
  }
}
// The K-quants' (v - bias) * scale + add, in f16 pair arithmetic with scale and add rounded to f16 first:
// one fma, rounded once. Where scale * v and add nearly cancel the result keeps the absolute error of the
// larger term (a unit in the last place of the sub-block's largest value), not one rounding of the small
// result as an f32 fma would: f16 arithmetic decodes the tiles about 3% faster in the products (sweep-matmul,
// H100: 4096 x 14336 Q4_K 442 -> 423 us), and the tiles hold f16 anyway.
void bytes_to_pairs_fma(uvec4 b, float16_t bias, float scale, float add, out f16vec2 v[8]) {
  f16vec2 s = f16vec2(float16_t(scale)), a = f16vec2(float16_t(add));
  [[unroll]] for (uint m = 0u; m < 4u; ++m) {
    v[2u * m] = fma(bytes01(b[m]) - f16vec2(bias), s, a);
    v[2u * m + 1u] = fma(bytes23(b[m]) - f16vec2(bias), s, a);
  }
}

#if WTYPE == 12 || WTYPE == 13
#include "kquant_scales.glsl"
#endif

// Values 16 p .. 16 p + 15 of the row whose first uvec4 is `row`.
void decode16(uint row, uint p, out f16vec2 v[8]) {
#if WTYPE == 102  // Q4_0x8: groups of 8 blocks (16 quant bytes each, then 8 f16 d); value e < 16 of a block
                  // is the low nibble of byte e, e >= 16 the high one
  uint blk = p >> 1, base = row + (blk >> 3) * 9u;
  uvec4 q = w4[base + (blk & 7u)];
  uvec4 sc = w4[base + 8u];
  uint word = sc[(blk & 7u) >> 1];
  float16_t d = (blk & 1u) != 0u ? unpackFloat2x16(word).y : unpackFloat2x16(word).x;
  uvec4 n = ((p & 1u) != 0u ? q >> 4 : q) & 0x0F0F0F0Fu;
  bytes_to_pairs(n, float16_t(1032.0), d, v);
#elif WTYPE == 108  // Q8_0x8: groups of 8 blocks (32 signed bytes each, then 8 f16 d)
  uint blk = p >> 1, base = row + (blk >> 3) * 17u;
  uvec4 q = w4[base + 2u * (blk & 7u) + (p & 1u)];
  uint word = w4[base + 16u][(blk & 7u) >> 1];
  float16_t d = (blk & 1u) != 0u ? unpackFloat2x16(word).y : unpackFloat2x16(word).x;
  bytes_to_pairs(q ^ 0x80808080u, float16_t(1152.0), d, v);  // (b ^ 0x80) - 128 = b
#elif WTYPE == 12 || WTYPE == 13  // Q4_K / Q5_K superblocks: d, dmin, scales (word 0), (Q5_K: qh), quants
#if WTYPE == 12
  const uint SB = 9u, QS = 1u;
#else
  const uint SB = 11u, QS = 3u;
#endif
  uint base = row + (p >> 4) * SB;
  uint e0 = (p & 15u) * 16u;  // first value inside the superblock
  uint j = e0 >> 5, hh = (e0 >> 4) & 1u;  // sub-block, half of it
  uvec4 head = w4[base];
  uvec4 q = w4[base + QS + 2u * (j >> 1) + hh];
  uvec4 n = ((j & 1u) != 0u ? q >> 4 : q) & 0x0F0F0F0Fu;
#if WTYPE == 13
  uvec4 qh = w4[base + 1u + hh];  // bit j of byte l: the fifth bit of value l of sub-block j
  n |= ((qh >> j) & 0x01010101u) << 4;
#endif
  vec2 dm = unpackHalf2x16(head.x);
  vec2 sm = kq_scale_min(head.yzw, j);
  bytes_to_pairs_fma(n, float16_t(1024.0), dm.x * sm.x, -dm.y * sm.y, v);
#elif WTYPE == 114  // Q6_Kx8: groups of 8 superblocks (ql 128, qh 64, 16 int8 scales; 13 words), then 8 f16 d
  uint s = p >> 4, gbase = row + (s >> 3) * 105u, sb = gbase + 13u * (s & 7u);
  uint e0 = (p & 15u) * 16u;
  uint n = e0 >> 7, q4 = (e0 >> 5) & 3u, hh = (e0 >> 4) & 1u;  // half, quarter, 16-value part
  uvec4 ql = w4[sb + 4u * n + 2u * (q4 & 1u) + hh];
  uvec4 qh = w4[sb + 8u + 2u * n + hh];
  uvec4 scales = w4[sb + 12u];
  uint si = 8u * n + 2u * q4 + hh;
  float sc = float(bitfieldExtract(int(scales[si >> 2]), int((si & 3u) * 8u), 8));
  uint dword = w4[gbase + 104u][(s & 7u) >> 1];
  float d = (s & 1u) != 0u ? unpackHalf2x16(dword).y : unpackHalf2x16(dword).x;
  uvec4 b = ((ql >> ((q4 >> 1) * 4u)) & 0x0F0F0F0Fu) | (((qh >> (2u * q4)) & 0x03030303u) << 4);
  bytes_to_pairs_fma(b, float16_t(1056.0), d * sc, 0.0, v);  // 1024 + 32: q - 32
#else
#error "tile_decode: WTYPE is not a 16-byte aligned format"
#endif
}
