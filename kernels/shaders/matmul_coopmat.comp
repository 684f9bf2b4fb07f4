#version 450
// matmul_coopmat_<type>: the matmul of matmul.comp on VK_NV_cooperative_matrix tensor cores. W and X tiles
// are decoded to f16 in shared memory; each of the 4 subgroups accumulates a 32x32 quarter of the 64x64
// output tile as 2x2 16x16 f32 matrices, stored through shared memory so row/token tails are guarded.
// Only dispatched where the device offers the extension with 16x16x16 f16 -> f32 and subgroups of 32
// (checked on the host); it is faster and not batch-invariant in the --deterministic sense.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x = 128) in;

#define BM 64u
#define BN 64u
#define BK 32u

layout(set = 0, binding = 0) readonly buffer W { uint wq[]; };
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint k;
  uint ntok;
  uint row_bytes;
  uint x_stride;
  uint y_stride;
  uint y_row0;    // row offset of this dispatch in y (weights split by rows)
  uint w_offset;  // byte offset of row 0 in the weight binding (bindings are aligned down)
} pc;

#include "matvec_blocks.glsl"

shared float16_t ws[BM * BK];  // [row][k]
shared float16_t xs[BN * BK];  // [token][k]
shared float cs[BM * BN];      // [token][row]

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  uint t0 = gl_WorkGroupID.z * BN;
  if (r0 >= pc.rows) return;  // uniform: a padding group of the flattened grid
  uint sg = gl_SubgroupID;
  uint sm = (sg & 1u) * 32u, sn = (sg >> 1) * 32u;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];
  for (uint i = 0u; i < 2u; ++i)
    for (uint j = 0u; j < 2u; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
    // 256 groups of 8 values in each of the W and X slices; 128 threads take two each.
    for (uint p = 0u; p < 2u; ++p) {
      uint slot = tid + 128u * p;
      uint lr = slot / 4u, lg = slot % 4u;
      float v[8];
      uint wrow = r0 + lr;
      if (wrow < pc.rows) {
        decode8(pc.w_offset + wrow * pc.row_bytes, k0 / 8u + lg, pc.k, v);
      } else {
        for (uint i = 0u; i < 8u; ++i) v[i] = 0.0;
      }
      for (uint i = 0u; i < 8u; ++i) ws[lr * BK + 8u * lg + i] = float16_t(v[i]);
      uint xtok = t0 + lr, kx = k0 + 8u * lg;
      for (uint i = 0u; i < 8u; ++i)
        xs[lr * BK + 8u * lg + i] =
            float16_t((xtok < pc.ntok && kx + i < pc.k) ? x[xtok * pc.x_stride + kx + i] : 0.0);
    }
    barrier();
    for (uint kk = 0u; kk < BK; kk += 16u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2], b[2];
      for (uint i = 0u; i < 2u; ++i) coopMatLoadNV(a[i], ws, (sm + 16u * i) * BK + kk, BK, false);
      // X slice stored [token][k] is B = X^T in column-major order.
      for (uint j = 0u; j < 2u; ++j) coopMatLoadNV(b[j], xs, (sn + 16u * j) * BK + kk, BK, true);
      for (uint i = 0u; i < 2u; ++i)
        for (uint j = 0u; j < 2u; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  // C[row][token] stored column-major = cs[token][row].
  for (uint i = 0u; i < 2u; ++i)
    for (uint j = 0u; j < 2u; ++j) coopMatStoreNV(acc[i][j], cs, (sn + 16u * j) * BM + sm + 16u * i, BM, true);
  barrier();
  for (uint e = tid; e < BM * BN; e += 128u) {
    uint t = t0 + e / BM, r = r0 + e % BM;
    if (t < pc.ntok && r < pc.rows) y[t * pc.y_stride + pc.y_row0 + r] = cs[e];
  }
}
