#version 450
// matmul_cm2_<type>: the matmul of matmul.comp through VK_NV_cooperative_matrix2's workgroup-scope matrices:
// the work group multiplies a BM x BK slice of W by a BK x BN slice of X^T into one BM x BN accumulator per
// k step, and the driver stages the slices through shared memory, pipelines the loads and splits the
// products among the subgroups (what matmul_coopmat.comp does by hand). W is read through a decode
// function the driver calls for each element it stages, with a reference to the element's block (a group
// of 8 blocks, or a K-quant superblock): the value as the f16 that tile_decode.glsl gives it, so both
// tensor-core paths multiply the same numbers. X comes as f16 (convert.comp). Only the 16-byte aligned
// formats: Q4_0x8, Q8_0x8, Q6_Kx8, Q4_K, Q5_K (k a multiple of their block). SPIR-V 1.6 (vulkan1.3). Not
// batch-invariant in the --deterministic sense (kernels/ops/matmul.h).
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128u;  // weight rows per work group
layout(constant_id = 2) const uint BN = 128u;  // tokens per work group
layout(constant_id = 3) const uint BK = 32u;   // values of k per step (divides 256)

// The block the decode function sees: QK values of one row in GROUP_WORDS 16-byte words.
#if WTYPE == 102  // Q4_0x8: 8 blocks of 16 quant bytes (value e < 16: low nibble of byte e), then 8 f16 d
#define QK 256u
#define GROUP_WORDS 9
#elif WTYPE == 108  // Q8_0x8: 8 blocks of 32 signed bytes, then 8 f16 d
#define QK 256u
#define GROUP_WORDS 17
#elif WTYPE == 12  // Q4_K superblock: d, dmin, 12 scale bytes; 128 quant bytes
#define QK 256u
#define GROUP_WORDS 9
#elif WTYPE == 13  // Q5_K superblock: d, dmin, scales; 32 high-bit bytes; 128 quant bytes
#define QK 256u
#define GROUP_WORDS 11
#elif WTYPE == 114  // Q6_Kx8: 8 superblocks (ql 128, qh 64, 16 int8 scales: 13 words each), then 8 f16 d
#define QK 2048u
#define GROUP_WORDS 105
#else
#error "matmul_cm2: WTYPE is not a 16-byte aligned format"
#endif
// Words, not 16-byte vectors: the decode function runs per element and loads only the word it needs.
struct Group { uint w[GROUP_WORDS * 4]; };
layout(set = 0, binding = 0) readonly buffer W { Group groups[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer GroupRef { Group g; };
layout(set = 0, binding = 1) readonly buffer X { float16_t x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint k;
  uint ntok;
  uint row_bytes;
  uint x_stride;
  uint y_stride;
  uint y_row0;
  uint w_offset;  // a multiple of the group's bytes (checked on the host)
} pc;

float16_t f16_half(uint word, uint i) { return unpackFloat2x16(word)[i & 1u]; }
// Byte b (0..15) of the group's 16-byte vector v, shifted right by `shift` more bits.
#define BYTE_OF(v, b, shift) (ref.g.w[4u * (v) + ((b) >> 2)] >> (((b) & 3u) * 8u + (shift)))
// Word i (0..3) of the group's 16-byte vector v.
#define WORD_OF(v, i) ref.g.w[4u * (v) + (i)]

#if WTYPE == 12 || WTYPE == 13
#include "kquant_scales.glsl"
#endif

// Value e (0 .. QK - 1) of the group.
float16_t decode_w(const in GroupRef ref, const in uint group[2], const in uint at[2]) {
  uint e = at[1];
#if WTYPE == 102
  uint blk = e >> 5, i = e & 31u;
  uint q = BYTE_OF(blk, i & 15u, (i >> 4) * 4u) & 0xFu;
  return (float16_t(q) - float16_t(8.0)) * f16_half(WORD_OF(8u, blk >> 1), blk);
#elif WTYPE == 108
  uint blk = e >> 5, i = e & 31u;
  int q = bitfieldExtract(int(WORD_OF(2u * blk + (i >> 4), (i & 15u) >> 2)), int((i & 3u) * 8u), 8);
  return float16_t(q) * f16_half(WORD_OF(16u, blk >> 1), blk);
#elif WTYPE == 12 || WTYPE == 13
#if WTYPE == 12
  const uint QS = 1u;
#else
  const uint QS = 3u;
#endif
  uint j = e >> 5, l = e & 31u;  // sub-block, value in it
  uint q = BYTE_OF(QS + 2u * (j >> 1) + (l >> 4), l & 15u, (j & 1u) * 4u) & 0xFu;
#if WTYPE == 13
  q |= (BYTE_OF(1u + (l >> 4), l & 15u, j) & 1u) << 4;
#endif
  vec2 dm = unpackHalf2x16(WORD_OF(0u, 0u));
  vec2 sm = kq_scale_min(uvec3(WORD_OF(0u, 1u), WORD_OF(0u, 2u), WORD_OF(0u, 3u)), j);
  return float16_t(fma(float(q), dm.x * sm.x, -dm.y * sm.y));
#elif WTYPE == 114
  uint s = e >> 8, sb = 13u * s, v = e & 255u;
  uint n = v >> 7, q4 = (v >> 5) & 3u, l = v & 31u, hh = l >> 4, lb = l & 15u;
  uint ql = BYTE_OF(sb + 4u * n + 2u * (q4 & 1u) + hh, lb, (q4 >> 1) * 4u) & 0xFu;
  uint qh = BYTE_OF(sb + 8u + 2u * n + hh, lb, 2u * q4) & 3u;
  uint si = 8u * n + 2u * q4 + hh;
  float sc = float(bitfieldExtract(int(WORD_OF(sb + 12u, si >> 2)), int((si & 3u) * 8u), 8));
  float d = float(f16_half(WORD_OF(104u, s >> 1), s));
  return float16_t(float(int(ql | (qh << 4)) - 32) * (d * sc));
#endif
}

// The k loop of one tile with layouts LW, LX (clamped for edge tiles, plain for whole ones), unrolled over
// 256 values so that the driver can overlap one step's loads with another's products (measured: faster
// than the plain loop, docs/BENCHMARKS.md).
#define UNROLLED_STEPS (256u / BK)
#define PRODUCT(LW, LX)                                                                                       \
  for (uint k0 = 0u; k0 < pc.k; k0 += UNROLLED_STEPS * BK) {                                                  \
    [[unroll]] for (uint j = 0u; j < UNROLLED_STEPS; ++j) {                                                   \
      coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;                                         \
      coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;                                         \
      coopMatLoadTensorNV(a, groups, w_elem, sliceTensorLayoutNV(LW, r0, BM, k0 + j * BK, BK), decode_w);    \
      coopMatLoadTensorNV(b, x, 0, sliceTensorLayoutNV(LX, t0, BN, k0 + j * BK, BK), transposed);            \
      acc = coopMatMulAdd(a, b, acc);                                                                         \
    }                                                                                                         \
  }

void main() {
  uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  uint t0 = gl_WorkGroupID.z * BN;
  if (r0 >= pc.rows) return;  // uniform: a padding group of the flattened grid

  // W: rows x k in groups of QK values (row stride in groups); X: tokens x k, read transposed as the
  // BK x BN operand; Y: tokens x (y_row0 + rows) with stride y_stride. Clamping keeps the edge tiles'
  // loads and stores inside the matrices.
  const uint group_bytes = GROUP_WORDS * 16u;
  uint w_elem = pc.w_offset / group_bytes, w_stride = pc.row_bytes / group_bytes;
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  tensorLayoutNV<2> lw_whole = createTensorLayoutNV(2);
  tensorLayoutNV<2> lx_whole = createTensorLayoutNV(2);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  lw = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(setTensorLayoutBlockSizeNV(lw, 1, QK), pc.rows, pc.k),
                               w_stride, 1);
  lw_whole = setTensorLayoutStrideNV(
      setTensorLayoutDimensionNV(setTensorLayoutBlockSizeNV(lw_whole, 1, QK), pc.rows, pc.k), w_stride, 1);
  lx = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lx, pc.ntok, pc.k), pc.x_stride, 1);
  lx_whole = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lx_whole, pc.ntok, pc.k), pc.x_stride, 1);
  ly = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(ly, pc.ntok, pc.y_row0 + pc.rows), pc.y_stride, 1);
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

  coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
  if (r0 + BM <= pc.rows && t0 + BN <= pc.ntok) {
    PRODUCT(lw_whole, lx_whole)
  } else {
    PRODUCT(lw, lx)
  }
  coopMatStoreTensorNV(acc, y, 0, sliceTensorLayoutNV(ly, t0, BN, pc.y_row0 + r0, BM), transposed);
}
