// Weight decoding shared by matvec*.comp and matmul*.comp: eight consecutive values of one weight row.
// The includer declares `readonly buffer { uint wq[]; }` (the weights, GGUF row layout) and defines WTYPE as
// a GGML type id. Rows and blocks are only 2-byte aligned (Q4_0 blocks are 18 bytes), so every read goes
// through 32-bit words with shifts: portable, needs no 8/16-bit storage feature.

// T_<type>: the type ids (T_Q4_K 12; device formats, kernels/ops/weight_format.h, past GGML's: T_Q4_0X8 102,
// groups of 8 blocks with the quants first, then the scales), generated from base/tensor_types.def.
#include "tensor_types.glsl"

uint w_u8(uint o) { return (wq[o >> 2] >> ((o & 3u) << 3)) & 0xFFu; }
uint w_u16(uint o) { return (wq[o >> 2] >> ((o & 2u) << 3)) & 0xFFFFu; }
// 32 bits at an even byte offset. Both words are always loaded (a select, not a branch) so the loads of
// several calls can be in flight together; the second index is clamped to stay inside the binding.
uint w_u32(uint o) {
  uint i = o >> 2;
  uint lo = wq[i];
  uint hi = wq[min(i + 1u, uint(wq.length()) - 1u)];
  return (o & 2u) == 0u ? lo : (lo >> 16) | (hi << 16);
}
float w_f16(uint o) { return unpackHalf2x16(w_u16(o)).x; }
// The small unsigned integer n (< 2^23) minus `bias`, exactly: 2^23 + n is the float with bits
// 0x4B000000 | n, so an OR and a subtract replace an integer-to-float conversion (a quarter-rate
// instruction on many GPUs; this one is full rate). Gives the same float as float(int(n) - bias).
float small_int(uint n, float bias) { return uintBitsToFloat(0x4B000000u | n) - (8388608.0 + bias); }

#include "kquant_scales.glsl"
// K-quant 6-bit scale and min number j (0..7) from the 12 packed bytes at `o` (an even offset).
void kq_scale_min(uint o, uint j, out float sc, out float mn) {
  vec2 r = kq_scale_min(uvec3(w_u32(o), w_u32(o + 4u), w_u32(o + 8u)), j);
  sc = r.x;
  mn = r.y;
}

// Types whose values are a * q + b with b != 0 (a block minimum).
#define DECODE_HAS_B (WTYPE == T_Q4_1 || WTYPE == T_Q5_1 || WTYPE == T_Q4_K || WTYPE == T_Q5_K)

// Values 8g .. 8g+7 of the row starting at byte `rb` as a * v[i] + b: v holds the small integers of the
// quantized types (the raw values of float types, a = 1, b = 0), so matvec applies the scale once per 8
// values. `k` is the row length (only float types have tails).
void decode8q(uint rb, uint g, uint k, out float v[8], out float a, out float b) {
  b = 0.0;
#if WTYPE == T_F32
  a = 1.0;
  uint e0 = 8u * g;
  for (uint i = 0u; i < 8u; ++i) v[i] = (e0 + i < k) ? uintBitsToFloat(w_u32(rb + 4u * (e0 + i))) : 0.0;
#elif WTYPE == T_F16 || WTYPE == T_BF16
  a = 1.0;
  uint e0 = 8u * g;
  uint h[4];
  if (e0 + 8u <= k) {
#ifdef HAS_WQ4
    // The includer also sees the weights as uvec4 (wq4): one load where the 8 values are 16-byte aligned.
    uint o = rb + 2u * e0;
    if ((o & 15u) == 0u) {
      uvec4 w = wq4[o >> 4];
      h[0] = w.x, h[1] = w.y, h[2] = w.z, h[3] = w.w;
    } else
#endif
    for (uint i = 0u; i < 4u; ++i) h[i] = w_u32(rb + 2u * e0 + 4u * i);
  } else {
    // Row tail: one half at a time, zeros past the end.
    for (uint i = 0u; i < 4u; ++i) {
      uint e = e0 + 2u * i;
      h[i] = ((e < k) ? w_u16(rb + 2u * e) : 0u) | (((e + 1u < k) ? w_u16(rb + 2u * e + 2u) : 0u) << 16);
    }
  }
  for (uint i = 0u; i < 4u; ++i) {
#if WTYPE == T_F16
    vec2 f = unpackHalf2x16(h[i]);
    v[2u * i] = f.x;
    v[2u * i + 1u] = f.y;
#else
    v[2u * i] = uintBitsToFloat(h[i] << 16);
    v[2u * i + 1u] = uintBitsToFloat(h[i] & 0xFFFF0000u);
#endif
  }
#elif WTYPE == T_Q4_0 || WTYPE == T_Q4_1 || WTYPE == T_Q4_0X8
  // 32 values per block: d (, m), 16 bytes; value e < 16 is the low nibble of byte e, e >= 16 the high one.
  // Q4_0x8 keeps the 16 bytes, in groups of 8 blocks: 8 x 16 quant bytes then 8 f16 scales.
  uint sub = g & 3u;
#if WTYPE == T_Q4_0X8
  uint blk = g >> 2, go = rb + (blk >> 3) * 144u;
  float d = w_f16(go + 128u + 2u * (blk & 7u));
  uint qo = go + 16u * (blk & 7u) + (sub & 1u) * 8u;
#else
#if WTYPE == T_Q4_0
  const uint BB = 18u, QS = 2u;
#else
  const uint BB = 20u, QS = 4u;
#endif
  uint bo = rb + (g >> 2) * BB;
  float d = w_f16(bo);
  uint qo = bo + QS + (sub & 1u) * 8u;
#endif
  uint w0 = w_u32(qo), w1 = w_u32(qo + 4u);
  uint sh = (sub >> 1) * 4u;
#if WTYPE == T_Q4_0 || WTYPE == T_Q4_0X8
  a = d;
  for (uint i = 0u; i < 4u; ++i) {
    v[i] = small_int((w0 >> (8u * i + sh)) & 0xFu, 8.0);
    v[i + 4u] = small_int((w1 >> (8u * i + sh)) & 0xFu, 8.0);
  }
#else
  a = d;
  b = w_f16(bo + 2u);
  for (uint i = 0u; i < 4u; ++i) {
    v[i] = small_int((w0 >> (8u * i + sh)) & 0xFu, 0.0);
    v[i + 4u] = small_int((w1 >> (8u * i + sh)) & 0xFu, 0.0);
  }
#endif
#elif WTYPE == T_Q5_0 || WTYPE == T_Q5_1
  // d (, m), 32 high bits (bit e for value e), 16 nibble bytes as in Q4.
#if WTYPE == T_Q5_0
  const uint BB = 22u, QH = 2u, QS = 6u;
#else
  const uint BB = 24u, QH = 4u, QS = 8u;
#endif
  uint bo = rb + (g >> 2) * BB;
  uint sub = g & 3u;
  float d = w_f16(bo);
  uint qh = w_u32(bo + QH) >> (8u * sub);
  uint qo = bo + QS + (sub & 1u) * 8u;
  uint w0 = w_u32(qo), w1 = w_u32(qo + 4u);
  uint sh = (sub >> 1) * 4u;
  a = d;
#if WTYPE == T_Q5_1
  b = w_f16(bo + 2u);
#endif
  for (uint i = 0u; i < 4u; ++i) {
    uint q0 = ((w0 >> (8u * i + sh)) & 0xFu) | (((qh >> i) & 1u) << 4);
    uint q1 = ((w1 >> (8u * i + sh)) & 0xFu) | (((qh >> (i + 4u)) & 1u) << 4);
#if WTYPE == T_Q5_0
    v[i] = small_int(q0, 16.0);
    v[i + 4u] = small_int(q1, 16.0);
#else
    v[i] = small_int(q0, 0.0);
    v[i + 4u] = small_int(q1, 0.0);
#endif
  }
#elif WTYPE == T_Q8_0 || WTYPE == T_Q8_0X8
#if WTYPE == T_Q8_0X8
  // Groups of 8 blocks: 8 x 32 quant bytes, then 8 f16 scales.
  uint blk = g >> 2, go = rb + (blk >> 3) * 272u;
  float d = w_f16(go + 256u + 2u * (blk & 7u));
  uint qo = go + 32u * (blk & 7u) + (g & 3u) * 8u;
#else
  uint bo = rb + (g >> 2) * 34u;
  float d = w_f16(bo);
  uint qo = bo + 2u + (g & 3u) * 8u;
#endif
  // A signed byte b is ((b ^ 0x80) as unsigned) - 128.
  uint w0 = w_u32(qo) ^ 0x80808080u, w1 = w_u32(qo + 4u) ^ 0x80808080u;
  a = d;
  for (uint i = 0u; i < 4u; ++i) {
    v[i] = small_int((w0 >> (8u * i)) & 0xFFu, 128.0);
    v[i + 4u] = small_int((w1 >> (8u * i)) & 0xFFu, 128.0);
  }
#elif WTYPE == T_Q4_K || WTYPE == T_Q5_K
  // 256 values: d, dmin, 12 scale bytes, (Q5_K: 32 high-bit bytes), 128 nibble bytes. Chunk j of 64 values
  // uses bytes 32j..32j+31: low nibbles for its first 32 values (scale 2j), high nibbles for the rest.
#if WTYPE == T_Q4_K
  const uint BB = 144u, QS = 16u;
#else
  const uint BB = 176u, QS = 48u;
#endif
  uint bo = rb + (g >> 5) * BB;
  uint e0 = (g & 31u) * 8u;
  uint j = e0 >> 6, hi = (e0 >> 5) & 1u, l0 = e0 & 31u;
  float sc, mn;
  kq_scale_min(bo + 4u, 2u * j + hi, sc, mn);
  float d = w_f16(bo) * sc;
  float m = w_f16(bo + 2u) * mn;
  uint qo = bo + QS + 32u * j + l0;
  uint w0 = w_u32(qo), w1 = w_u32(qo + 4u);
  uint sh = hi * 4u;
#if WTYPE == T_Q5_K
  uint h0 = w_u32(bo + 16u + l0), h1 = w_u32(bo + 20u + l0);
  uint hb = 2u * j + hi;
#endif
  for (uint i = 0u; i < 4u; ++i) {
    uint q0 = (w0 >> (8u * i + sh)) & 0xFu;
    uint q1 = (w1 >> (8u * i + sh)) & 0xFu;
#if WTYPE == T_Q5_K
    q0 |= ((h0 >> (8u * i + hb)) & 1u) << 4;
    q1 |= ((h1 >> (8u * i + hb)) & 1u) << 4;
#endif
    v[i] = small_int(q0, 0.0);
    v[i + 4u] = small_int(q1, 0.0);
  }
  a = d;
  b = -m;
#elif WTYPE == T_Q6_K || WTYPE == T_Q6_KX8
  // 256 values: 128 low-nibble bytes, 64 high-2-bit bytes, 16 int8 scales, d. Half n (128 values), quarter
  // q (32 values), lane l: low bits from byte 64n + 32(q&1) + l (nibble q>>1), high bits from byte
  // 128 + 32n + l (bits 2q, 2q+1), scale 8n + 2q + l/16. Q6_Kx8: groups of 8 superblocks without their d
  // (208 bytes each), then the 8 f16 d.
#if WTYPE == T_Q6_KX8
  uint s = g >> 5, go = rb + (s >> 3) * 1680u;
  uint bo = go + 208u * (s & 7u);
  float d6 = w_f16(go + 1664u + 2u * (s & 7u));
#else
  uint bo = rb + (g >> 5) * 210u;
  float d6 = w_f16(bo + 208u);
#endif
  uint e0 = (g & 31u) * 8u;
  uint n = e0 >> 7, q = (e0 >> 5) & 3u, l0 = e0 & 31u;
  uint lo = bo + 64u * n + 32u * (q & 1u) + l0;
  uint w0 = w_u32(lo), w1 = w_u32(lo + 4u);
  uint ho = bo + 128u + 32u * n + l0;
  uint h0 = w_u32(ho), h1 = w_u32(ho + 4u);
  uint sh = (q >> 1) * 4u, hs = 2u * q;
  int scb = int(w_u8(bo + 192u + 8u * n + 2u * q + (l0 >> 4)));
  float d = d6 * float(bitfieldExtract(scb, 0, 8));
  for (uint i = 0u; i < 4u; ++i) {
    v[i] = small_int(((w0 >> (8u * i + sh)) & 0xFu) | (((h0 >> (8u * i + hs)) & 3u) << 4), 32.0);
    v[i + 4u] = small_int(((w1 >> (8u * i + sh)) & 0xFu) | (((h1 >> (8u * i + hs)) & 3u) << 4), 32.0);
  }
  a = d;
#else
#error "WTYPE is not a supported type"
#endif
}

// Values 8g .. 8g+7 of the row (see decode8q).
void decode8(uint rb, uint g, uint k, out float v[8]) {
  float a, b;
  decode8q(rb, g, k, v, a, b);
  for (uint i = 0u; i < 8u; ++i) v[i] = fma(a, v[i], b);
}
