// Weight units and quantized activations of matvec_q8.comp. A unit is 32 weights of one row that one
// 16-byte load of quants (two for Q8_0) holds; it pairs with two groups of 16 x values (A and B, UNIT_X_GAP
// apart), each quantized to bytes with its own scale. A unit decodes to two vectors of 16 small integers
// (`a`, `b`, one byte each) and four floats `f`, so that for Q6_K
//   sum(w * x) = A.d * (f.x * dot(a, A.q) - f.z * sum(A.q)) + B.d * (f.y * dot(b, B.q) - f.w * sum(B.q)).
// Q4_0 and Q8_0 take a shorter form (a unit's two halves share the scale d = f.x and the offset o, 8 and 0):
//   sum(w * x) = d * (A.d * (dot(a, A.q) - o sum(A.q)) + B.d * (dot(b, B.q) - o sum(B.q))),
// the offsets' integer terms exact; Q4_K and Q5_K keep their sub-blocks' 6-bit scales s and mins m as
// integers (`sm`), with the superblock's d and dmin in f.x and f.y:
//   sum(w * x) = d * (A.d * s_a dot(a, A.q) + B.d * s_b dot(b, B.q)) - dmin * (m_a A.d sum(A.q) + m_b B.d sum(B.q)).
// The parts that depend only on x (UnitX) are computed once a unit for all of a thread's rows, and integers
// become floats by exact_float (two full-rate instructions) rather than a conversion (a quarter-rate one on
// NVIDIA): fewer and cheaper instructions a unit, which the decode products with several rows a thread need
// (docs/BENCHMARKS.md, sessions 21 and 22).
// The includer declares `readonly buffer { uvec4 w4[]; }` (rows of the device format, kernels/ops/
// weight_format.h, 16-byte aligned), defines WTYPE and includes q8_activations.glsl first.

#include "tensor_types.glsl"  // T_<type> ids, generated from base/tensor_types.def

struct WUnit {
  uvec4 a, b;  // the 16 + 16 integer weights, one byte each (0..63 except Q8_0's signed bytes)
  vec4 f;      // scales of a and b, and the offsets times sum(q) that turn them into weights (Q4_0, Q8_0: d;
               // Q4_K, Q5_K: d, dmin)
#if WTYPE == T_Q4_K || WTYPE == T_Q5_K
  uvec2 sm;  // the scales (x) and mins (y) of a's and b's sub-blocks, in bytes 0 and 1
#endif
};

// The float of an integer of magnitude below 2^22, exactly as float(i) gives it: the integer added to the
// mantissa of 1.5 * 2^23, which is then subtracted.
float exact_float(int i) {
  return intBitsToFloat(0x4B400000 + i) - 12582912.0;
}

#ifdef INT_DOT
int dot4_acc(uint a, uint b, int acc) { return dotPacked4x8AccSatEXT(int(a), int(b), acc); }
#else
int dot4_acc(uint a, uint b, int acc) {
  ivec4 va = ivec4(bitfieldExtract(int(a), 0, 8), bitfieldExtract(int(a), 8, 8), bitfieldExtract(int(a), 16, 8),
                   bitfieldExtract(int(a), 24, 8));
  ivec4 vb = ivec4(bitfieldExtract(int(b), 0, 8), bitfieldExtract(int(b), 8, 8), bitfieldExtract(int(b), 16, 8),
                   bitfieldExtract(int(b), 24, 8));
  return acc + va.x * vb.x + va.y * vb.y + va.z * vb.z + va.w * vb.w;
}
#endif

// The integer dot products of a unit's halves with x's groups A and B (bytes qa, qb), each a chain of four.
ivec2 unit_dots(WUnit w, uvec4 qa, uvec4 qb) {
  int ia = dot4_acc(w.a.x, qa.x, 0);
  ia = dot4_acc(w.a.y, qa.y, ia);
  ia = dot4_acc(w.a.z, qa.z, ia);
  ia = dot4_acc(w.a.w, qa.w, ia);
  int ib = dot4_acc(w.b.x, qb.x, 0);
  ib = dot4_acc(w.b.y, qb.y, ib);
  ib = dot4_acc(w.b.z, qb.z, ib);
  ib = dot4_acc(w.b.w, qb.w, ib);
  return ivec2(ia, ib);
}

#if WTYPE == T_Q4_0X8 || WTYPE == T_Q8_0X8
#if WTYPE == T_Q4_0X8
#define UNIT_OFFSET 8
#else
#define UNIT_OFFSET 0
#endif
// A unit's x for Q4_0 and Q8_0: both groups' bytes and scales, and the offsets' integer terms.
struct UnitX {
  uvec4 qa, qb;
  float da, db;
  int oa, ob;
};
UnitX unit_x(XGroup A, XGroup B) {
  return UnitX(A.q, B.q, A.d, B.d, -UNIT_OFFSET * A.s, -UNIT_OFFSET * B.s);
}
// The offsets are added after the dot products, not as their first accumulator: an accumulator the
// compiler cannot bound makes each saturating step cost more (8 sequences' products 6-8% slower).
float unit_dot(WUnit w, UnitX x) {
  ivec2 i = unit_dots(w, x.qa, x.qb);
  precise float s = fma(x.da, exact_float(i.x + x.oa), x.db * exact_float(i.y + x.ob));  // |i| <= 16 * 127^2
  return w.f.x * s;
}
#elif WTYPE == T_Q4_K || WTYPE == T_Q5_K
// A unit's x for Q4_K and Q5_K: both groups' bytes and scales, and each scale times its group's sum.
struct UnitX {
  uvec4 qa, qb;
  float da, db, ma, mb;
};
UnitX unit_x(XGroup A, XGroup B) {
  return UnitX(A.q, B.q, A.d, B.d, A.d * float(A.s), B.d * float(B.s));
}
float unit_dot(WUnit w, UnitX x) {
  ivec2 i = unit_dots(w, x.qa, x.qb);
  // |i.x * s_a| <= 16 * 31 * 127 * 63 (Q5_K's 5-bit weights) < 2^22.
  precise float s = fma(x.da, exact_float(i.x * int(w.sm.x & 0xFFu)), x.db * exact_float(i.y * int(w.sm.x >> 8)));
  precise float m = fma(x.ma, exact_float(int(w.sm.y & 0xFFu)), x.mb * exact_float(int(w.sm.y >> 8)));
  return fma(w.f.x, s, -w.f.y * m);
}
#else
struct UnitX {
  XGroup A, B;
};
UnitX unit_x(XGroup A, XGroup B) {
  return UnitX(A, B);
}
float unit_dot(WUnit w, UnitX x) {
  ivec2 i = unit_dots(w, x.A.q, x.B.q);
  precise float sa = fma(w.f.x, exact_float(i.x), -w.f.z * float(x.A.s));  // |i| <= 16 * 63 * 127
  precise float sb = fma(w.f.y, exact_float(i.y), -w.f.w * float(x.B.s));
  return fma(x.A.d, sa, x.B.d * sb);
}
#endif

// Half i (0..7) of the f16 pairs in word o of w4 (the scale arrays of the x8 formats): one 32-bit load.
float half_at(uint o, uint i) {
  return unpackHalf2x16(w4[o][i >> 1] >> (16u * (i & 1u))).x;
}

#if WTYPE == T_Q4_K || WTYPE == T_Q5_K
#include "kquant_scales.glsl"
#endif

#if WTYPE == T_Q4_0X8 || WTYPE == T_Q8_0X8
// Unit = one block of 32: x values 32u .. 32u + 31.
#define UNIT_X_GAP 16u
uint unit_x_first(uint u) { return 32u * u; }
#elif WTYPE == T_Q4_K || WTYPE == T_Q5_K
// Unit u = superblock u / 8, sub-block pair p, half h: bytes 16h.. of the pair's 32 quant bytes hold
// values 16h.. of sub-block 2p (low nibbles) and of sub-block 2p + 1 (high nibbles).
#define UNIT_X_GAP 32u
uint unit_x_first(uint u) { return 256u * (u >> 3) + 64u * ((u & 7u) >> 1) + 16u * (u & 1u); }
#elif WTYPE == T_Q6_KX8
// Unit u = superblock u / 8, half n, quarter a (0, 1), part b: the 16 ql bytes at 64n + 32a + 16b hold
// quarter a (low nibbles) and quarter a + 2 (high nibbles) of values 16b..16b+15, each with its qh bits.
#define UNIT_X_GAP 64u
uint unit_x_first(uint u) {
  uint s = u >> 3, n = (u >> 2) & 1u, a = (u >> 1) & 1u, b = u & 1u;
  return 256u * s + 128u * n + 32u * a + 16u * b;
}
#else
#error "matvec_q8: WTYPE is not a supported device format"
#endif

// Unit u of the row whose first word is `row`.
WUnit load_unit(uint row, uint u) {
  WUnit w;
#if WTYPE == T_Q4_0X8
  // Groups of 8 blocks: 8 x 16 quant bytes, then 8 f16 scales (9 words).
  uint base = row + (u >> 3) * 9u, j = u & 7u;
  uvec4 q = w4[base + j];
  float d = half_at(base + 8u, j);
  w.a = q & 0x0F0F0F0Fu;
  w.b = (q >> 4) & 0x0F0F0F0Fu;
  w.f = vec4(d, 0.0, 0.0, 0.0);
#elif WTYPE == T_Q8_0X8
  // Groups of 8 blocks: 8 x 32 quant bytes, then 8 f16 scales (17 words).
  uint base = row + (u >> 3) * 17u;
  w.a = w4[base + 2u * (u & 7u)];
  w.b = w4[base + 2u * (u & 7u) + 1u];
  w.f = vec4(half_at(base + 16u, u & 7u), 0.0, 0.0, 0.0);
#elif WTYPE == T_Q4_K || WTYPE == T_Q5_K
  // Superblocks of 256: d, dmin, 12 scale bytes (word 0), (Q5_K: 32 high-bit bytes), 128 quant bytes.
#if WTYPE == T_Q4_K
  const uint SB = 9u, QS = 1u;
#else
  const uint SB = 11u, QS = 3u;
#endif
  uint base = row + (u >> 3) * SB;
  uint p = (u & 7u) >> 1, h = u & 1u;
  uvec4 head = w4[base];
  uvec4 q = w4[base + QS + 2u * p + h];
  w.f = vec4(unpackHalf2x16(head.x), 0.0, 0.0);
  w.sm = kq_pair_scales_mins(head.yzw, p);
  w.a = q & 0x0F0F0F0Fu;
  w.b = (q >> 4) & 0x0F0F0F0Fu;
#if WTYPE == T_Q5_K
  uvec4 qh = w4[base + 1u + h];  // high bit of value 16h + i of sub-block j: bit j of byte i
  w.a |= ((qh >> (2u * p)) & 0x01010101u) << 4;
  w.b |= ((qh >> (2u * p + 1u)) & 0x01010101u) << 4;
#endif
#elif WTYPE == T_Q6_KX8
  // Groups of 8 superblocks: 8 x (128 ql, 64 qh, 16 int8 scales) (13 words each), then 8 f16 d (1 word).
  uint s = u >> 3, n = (u >> 2) & 1u, a = (u >> 1) & 1u, b = u & 1u;
  uint gbase = row + (s >> 3) * 105u;
  uint sb = gbase + 13u * (s & 7u);
  uvec4 ql = w4[sb + 4u * n + 2u * a + b];
  uvec4 qh = w4[sb + 8u + 2u * n + b];
  uvec4 sc = w4[sb + 12u];
  float d = half_at(gbase + 104u, s & 7u);
  uint ia = 8u * n + 2u * a + b, ib = ia + 4u;
  float sa = float(bitfieldExtract(int(sc[ia >> 2]), int((ia & 3u) * 8u), 8));
  float sb_ = float(bitfieldExtract(int(sc[ib >> 2]), int((ib & 3u) * 8u), 8));
  w.a = (ql & 0x0F0F0F0Fu) | (((qh >> (2u * a)) & 0x03030303u) << 4);
  w.b = ((ql >> 4) & 0x0F0F0F0Fu) | (((qh >> (2u * a + 4u)) & 0x03030303u) << 4);
  w.f = vec4(d * sa, d * sb_, 32.0 * d * sa, 32.0 * d * sb_);
#endif
  return w;
}
