#version 450
// matvec_wide_<type>: y = W x for ONE token, for Q4_0 and Q8_0 rows of whole pairs of blocks (cols a multiple
// of 64), the decode step's bandwidth-bound product. Each subgroup owns ROWS rows; its lanes walk a row in
// pairs of blocks, so a lane reads one pair as consecutive aligned 32-bit words (9 words for Q4_0's 36
// bytes, 17 for Q8_0's 68: no partial words, no second load for a straddling value) and neighbouring lanes
// read neighbouring pairs (coalesced). The 64 x values of a pair are loaded once and used for all ROWS
// rows. Small integers become floats by the 2^23 exponent trick (an OR and a subtract, full rate) rather
// than integer conversion. The subgroup sums its lanes and lane 0 writes; no shared memory, no barrier.
// Not batch-invariant against matvec.comp (different summation order): the --deterministic path never
// dispatches it.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;

#define ROWS 2u
#define T_Q4_0 2
#define T_Q8_0 8

layout(set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint k;
  uint ntok;  // 1
  uint row_bytes;
  uint x_stride;
  uint y_stride;
  uint y_row0;
  uint w_offset;  // multiple of 4 (checked on the host)
} pc;

const float kMagic = 8388608.0;  // 2^23: uintBitsToFloat(0x4B000000 | n) == 2^23 + n for n < 2^23

// The four bytes of `q` as floats, each minus `bias`.
vec4 bytes_minus(uint q, float bias) {
  uvec4 b = (uvec4(q) >> uvec4(0u, 8u, 16u, 24u)) & 0xFFu;
  return uintBitsToFloat(b | 0x4B000000u) - (kMagic + bias);
}
float f16_lo(uint word) { return unpackHalf2x16(word).x; }
float f16_hi(uint word) { return unpackHalf2x16(word).y; }
// Bytes 2..5 of the word pair (lo, hi): a value that starts 2 bytes into `lo`.
uint shifted(uint lo, uint hi) { return (lo >> 16) | (hi << 16); }

#if WTYPE == T_Q4_0
#define PAIR_WORDS 9u
// Block of 32 values: d and 16 bytes q0..q3; value j < 16 is the low nibble of byte j, j >= 16 the high
// nibble of byte j - 16; both minus 8. xb: the vec4 index of the block's first x value.
float block_dot(uint q0, uint q1, uint q2, uint q3, uint xb, vec4 xv[16]) {
  uint q[4] = uint[4](q0, q1, q2, q3);
  float s = 0.0;
  for (uint i = 0u; i < 4u; ++i) {
    s += dot(bytes_minus(q[i] & 0x0F0F0F0Fu, 8.0), xv[xb + i]);
    s += dot(bytes_minus((q[i] >> 4) & 0x0F0F0F0Fu, 8.0), xv[xb + 4u + i]);
  }
  return s;
}
float pair_dot(uint wi, vec4 xv[16]) {
  uint a[PAIR_WORDS];
  for (uint i = 0u; i < PAIR_WORDS; ++i) a[i] = w[wi + i];
  // Block A: bytes 0..17 (d in the low half of word 0); block B: bytes 18..35 (d in the high half of word 4,
  // its quants in words 5..8).
  float sa = block_dot(shifted(a[0], a[1]), shifted(a[1], a[2]), shifted(a[2], a[3]), shifted(a[3], a[4]), 0u, xv);
  float sb = block_dot(a[5], a[6], a[7], a[8], 8u, xv);
  return f16_lo(a[0]) * sa + f16_hi(a[4]) * sb;
}
#elif WTYPE == T_Q8_0
#define PAIR_WORDS 17u
// Block of 32 signed bytes q0..q7 and d; a signed byte is (byte ^ 0x80) - 128.
float block_dot(uint q[8], uint xb, vec4 xv[16]) {
  float s = 0.0;
  for (uint i = 0u; i < 8u; ++i) s += dot(bytes_minus(q[i] ^ 0x80808080u, 128.0), xv[xb + i]);
  return s;
}
float pair_dot(uint wi, vec4 xv[16]) {
  uint a[PAIR_WORDS];
  for (uint i = 0u; i < PAIR_WORDS; ++i) a[i] = w[wi + i];
  // Block A: bytes 0..33 (d low half of word 0, quants from byte 2); block B: bytes 34..67 (d high half of
  // word 8, quants in words 9..16).
  uint qa[8], qb[8];
  for (uint i = 0u; i < 8u; ++i) {
    qa[i] = shifted(a[i], a[i + 1u]);
    qb[i] = a[9u + i];
  }
  return f16_lo(a[0]) * block_dot(qa, 0u, xv) + f16_hi(a[8]) * block_dot(qb, 8u, xv);
}
#else
#error "matvec_wide supports Q4_0 and Q8_0"
#endif

void main() {
  uint row0 = ((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_NumSubgroups + gl_SubgroupID) * ROWS;
  if (row0 >= pc.rows) return;  // uniform in the subgroup, and nothing below synchronizes the work group
  uint lane = gl_SubgroupInvocationID;
  uint pairs = pc.k / 64u;
  uint last_row = pc.rows - 1u;

  float acc[ROWS];
  for (uint r = 0u; r < ROWS; ++r) acc[r] = 0.0;
  for (uint p = lane; p < pairs; p += gl_SubgroupSize) {
    vec4 xv[16];
    for (uint i = 0u; i < 16u; ++i) xv[i] = x4[16u * p + i];
    for (uint r = 0u; r < ROWS; ++r) {
      // Rows past the end re-read the last row (never stored), keeping the loop free of branches.
      uint wi = (pc.w_offset + min(row0 + r, last_row) * pc.row_bytes) / 4u + PAIR_WORDS * p;
      acc[r] += pair_dot(wi, xv);
    }
  }
  for (uint r = 0u; r < ROWS; ++r) {
    float s = subgroupAdd(acc[r]);
    if (lane == 0u && row0 + r < pc.rows) y[pc.y_row0 + row0 + r] = s;
  }
}
