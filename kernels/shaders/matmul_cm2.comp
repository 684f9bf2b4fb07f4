#version 450
// matmul_cm2_<type>: the matmul of matmul.comp through VK_NV_cooperative_matrix2's workgroup-scope matrices:
// the work group multiplies a BM x BK slice of W by a BK x BN slice of X^T into one BM x BN accumulator per
// k step, and the driver stages the slices through shared memory, pipelines the loads and splits the
// products among the subgroups (what matmul_coopmat.comp does by hand). W is read through a decode
// function, called by the driver for each element it stages: the element's value as the f16 that
// tile_decode.glsl gives it, so both tensor-core paths multiply the same numbers. X (f32) is converted to
// f16 the same way. Only the 16-byte aligned formats: Q4_0x8, Q8_0x8, Q6_Kx8, Q4_K, Q5_K (k a multiple of
// 256). SPIR-V 1.6 (vulkan1.3). Not batch-invariant in the --deterministic sense (kernels/ops/matmul.h).
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

#ifdef WREF  // (Q4_0x8) the decode function reads its group of 8 blocks through the driver's reference
struct Q4x8 { uvec4 q[8]; uvec4 d; };
layout(set = 0, binding = 0) readonly buffer W { Q4x8 wb[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer GroupRef { Q4x8 g; };
#define W_BUF wb
#else
layout(set = 0, binding = 0) readonly buffer W { uint wq[]; };
#define W_BUF wq
#endif
#ifdef X16  // X already f16: loaded by the driver without a decode function
layout(set = 0, binding = 1) readonly buffer X { float16_t xh[]; };
#else
layout(set = 0, binding = 1) readonly buffer X { float xf[]; };
#endif
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint k;
  uint ntok;
  uint row_bytes;
  uint x_stride;
  uint y_stride;
  uint y_row0;
  uint w_offset;
} pc;

// The decode functions address W and X themselves from the element's coordinates (block size 1), so the
// binding offsets of kernels/ops need not be multiples of a block; the reference the driver passes is
// unused.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Unused { uint v; };

float16_t f16_half(uint word, uint i) { return unpackFloat2x16(word)[i & 1u]; }

#if WTYPE == 12 || WTYPE == 13
#include "kquant_scales.glsl"
#endif

#ifndef WREF
// Weight (row, kk) as f16: the value tile_decode.glsl's decode16 gives it.
float16_t weight(uint row, uint kk) {
  uint base = (pc.w_offset >> 2) + row * (pc.row_bytes >> 2);  // the row's first word
#if WTYPE == 102  // Q4_0x8: groups of 8 blocks (16 quant bytes each, then 8 f16 d)
  uint g = base + (kk >> 8) * 36u, blk = (kk >> 5) & 7u, i = kk & 31u;
  uint q = (wq[g + 4u * blk + ((i & 15u) >> 2)] >> ((i & 3u) * 8u + (i >> 4) * 4u)) & 0xFu;
  return (float16_t(q) - float16_t(8.0)) * f16_half(wq[g + 32u + (blk >> 1)], blk);
#elif WTYPE == 108  // Q8_0x8: groups of 8 blocks (32 signed bytes each, then 8 f16 d)
  uint g = base + (kk >> 8) * 68u, blk = (kk >> 5) & 7u, i = kk & 31u;
  int q = bitfieldExtract(int(wq[g + 8u * blk + (i >> 2)]), int((i & 3u) * 8u), 8);
  return float16_t(q) * f16_half(wq[g + 64u + (blk >> 1)], blk);
#elif WTYPE == 12 || WTYPE == 13  // Q4_K / Q5_K superblocks: d, dmin, scales, (Q5_K: qh), quants
#if WTYPE == 12
  const uint SB = 36u, QS = 4u;
#else
  const uint SB = 44u, QS = 12u;
#endif
  uint s = base + (kk >> 8) * SB, e = kk & 255u, j = e >> 5, l = e & 31u;
  uint q = (wq[s + QS + 8u * (j >> 1) + (l >> 2)] >> ((l & 3u) * 8u + (j & 1u) * 4u)) & 0xFu;
#if WTYPE == 13
  q |= ((wq[s + 4u + (l >> 2)] >> ((l & 3u) * 8u + j)) & 1u) << 4;
#endif
  vec2 dm = unpackHalf2x16(wq[s]);
  vec2 sm = kq_scale_min(uvec3(wq[s + 1u], wq[s + 2u], wq[s + 3u]), j);
  return float16_t(fma(float(q), dm.x * sm.x, -dm.y * sm.y));
#elif WTYPE == 114  // Q6_Kx8: groups of 8 superblocks (ql 128, qh 64, 16 int8 scales), then 8 f16 d
  uint sbi = kk >> 8, g = base + (sbi >> 3) * 420u, sb = g + 52u * (sbi & 7u);
  uint e = kk & 255u, n = e >> 7, q4 = (e >> 5) & 3u, l = e & 31u, hh = l >> 4, lb = l & 15u;
  uint ql = (wq[sb + 4u * (4u * n + 2u * (q4 & 1u) + hh) + (lb >> 2)] >> ((lb & 3u) * 8u + (q4 >> 1) * 4u)) & 0xFu;
  uint qh = (wq[sb + 4u * (8u + 2u * n + hh) + (lb >> 2)] >> ((lb & 3u) * 8u + 2u * q4)) & 3u;
  uint si = 8u * n + 2u * q4 + hh;
  float sc = float(bitfieldExtract(int(wq[sb + 48u + (si >> 2)]), int((si & 3u) * 8u), 8));
  float d = float(f16_half(wq[g + 416u + ((sbi & 7u) >> 1)], sbi));
  return float16_t(float(int(ql | (qh << 4)) - 32) * (d * sc));
#else
#error "matmul_cm2: WTYPE is not a 16-byte aligned format"
#endif
}
#endif

#ifdef WREF
float16_t decode_w(const in GroupRef ref, const in uint group[2], const in uint at[2]) {
  uint blk = at[1] >> 5, i = at[1] & 31u;
  uint q = (ref.g.q[blk][(i & 15u) >> 2] >> ((i & 3u) * 8u + (i >> 4) * 4u)) & 0xFu;
  return (float16_t(q) - float16_t(8.0)) * f16_half(ref.g.d[blk >> 1], blk);
}
#else
float16_t decode_w(const in Unused ref, const in uint coord[2], const in uint unused[2]) {
  return coord[0] < pc.rows ? weight(coord[0], coord[1]) : float16_t(0.0);
}
#endif
#ifndef X16
float16_t decode_x(const in Unused ref, const in uint coord[2], const in uint unused[2]) {
  return coord[0] < pc.ntok ? float16_t(xf[coord[0] * pc.x_stride + coord[1]]) : float16_t(0.0);
}
#define X_BUF xf
#define DECODE_X , decode_x
#else
#define X_BUF xh
#define DECODE_X
#endif

// The k loop of one tile with layouts LW, LX (clamped for edge tiles, plain for whole ones), unrolled over
// the 256 values of a block group so that the driver can overlap one step's loads with another's products.
#ifdef ROLLED
#define UNROLLED_STEPS 1u
#else
#define UNROLLED_STEPS (256u / BK)
#endif
#define PRODUCT(LW, LX)                                                                                     \
  for (uint k0 = 0u; k0 < pc.k; k0 += UNROLLED_STEPS * BK) {                                                \
    [[unroll]] for (uint j = 0u; j < UNROLLED_STEPS; ++j) {                                                 \
      coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;                                       \
      coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;                                       \
      coopMatLoadTensorNV(a, W_BUF, w_elem, sliceTensorLayoutNV(LW, r0, BM, k0 + j * BK, BK), decode_w);   \
      coopMatLoadTensorNV(b, X_BUF, 0, sliceTensorLayoutNV(LX, t0, BN, k0 + j * BK, BK), transposed DECODE_X); \
      acc = coopMatMulAdd(a, b, acc);                                                                       \
    }                                                                                                       \
  }

void main() {
  uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  uint t0 = gl_WorkGroupID.z * BN;
  if (r0 >= pc.rows) return;  // uniform: a padding group of the flattened grid

  // W: rows x k; X: tokens x k (read transposed as the BK x BN operand); Y: tokens x (y_row0 + rows) with
  // stride y_stride. Clamping keeps the edge tiles' loads and stores inside the matrices.
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  tensorLayoutNV<2> lw_whole = createTensorLayoutNV(2);
  tensorLayoutNV<2> lx_whole = createTensorLayoutNV(2);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
#ifdef WREF
  const uint GROUP_BYTES = 144u;
  lw = setTensorLayoutBlockSizeNV(lw, 1, 256);
  lw_whole = setTensorLayoutBlockSizeNV(lw_whole, 1, 256);
  uint w_elem = pc.w_offset / GROUP_BYTES, w_stride = pc.row_bytes / GROUP_BYTES;
#else
  uint w_elem = 0u, w_stride = pc.k;
#endif
  lw = setTensorLayoutDimensionNV(lw, pc.rows, pc.k);
  lw_whole = setTensorLayoutDimensionNV(lw_whole, pc.rows, pc.k);
  lw = setTensorLayoutStrideNV(lw, w_stride, 1);
  lw_whole = setTensorLayoutStrideNV(lw_whole, w_stride, 1);
  lx = setTensorLayoutDimensionNV(lx, pc.ntok, pc.k);
  lx_whole = setTensorLayoutDimensionNV(lx_whole, pc.ntok, pc.k);
  lx = setTensorLayoutStrideNV(lx, pc.x_stride, 1);
  lx_whole = setTensorLayoutStrideNV(lx_whole, pc.x_stride, 1);
  ly = setTensorLayoutDimensionNV(ly, pc.ntok, pc.y_row0 + pc.rows);
  ly = setTensorLayoutStrideNV(ly, pc.y_stride, 1);
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
