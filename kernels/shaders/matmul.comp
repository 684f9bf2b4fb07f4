#version 450
// matmul_<type>: Y[t][r] = dot(W[r, :], X[t, :]) for many tokens (prefill). A work group computes a 64-row x
// 64-token tile: each k step of 32 decodes a 64x32 slice of W (one 8-value group per thread) and a 32x64
// slice of X into shared memory, then every thread updates its 4x4 register block. Tails in rows, tokens
// and (float types) k are zero-padded. Each output is accumulated by one thread in increasing k with fma,
// so results do not depend on the token count (batch-invariant among matmul calls, not equal to matvec).
layout(local_size_x = 256) in;

#define BM 64u
#define BN 64u
#define BK 32u
#define PAD 1u

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

shared float ws[BK][BM + PAD];
shared float xs[BK][BN + PAD];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  uint t0 = gl_WorkGroupID.z * BN;
  if (r0 >= pc.rows) return;  // uniform: a padding group of the flattened grid
  uint tx = tid % 16u, ty = tid / 16u;

  float acc[4][4];
  for (uint i = 0u; i < 4u; ++i)
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;

  // Loader roles: W row lr (group lg of the k step); X token lr, values 8lg .. 8lg+7.
  uint lr = tid / 4u, lg = tid % 4u;
  uint wrow = r0 + lr;
  uint xtok = t0 + lr;
  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
    float v[8];
    if (wrow < pc.rows) {
      decode8(pc.w_offset + wrow * pc.row_bytes, k0 / 8u + lg, pc.k, v);
    } else {
      for (uint i = 0u; i < 8u; ++i) v[i] = 0.0;
    }
    for (uint i = 0u; i < 8u; ++i) ws[8u * lg + i][lr] = v[i];
    uint kx = k0 + 8u * lg;
    for (uint i = 0u; i < 8u; ++i)
      xs[8u * lg + i][lr] = (xtok < pc.ntok && kx + i < pc.k) ? x[xtok * pc.x_stride + kx + i] : 0.0;
    barrier();
    for (uint kk = 0u; kk < BK; ++kk) {
      float a[4], b[4];
      for (uint i = 0u; i < 4u; ++i) a[i] = ws[kk][tx + 16u * i];
      for (uint j = 0u; j < 4u; ++j) b[j] = xs[kk][ty + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier();
  }

  for (uint j = 0u; j < 4u; ++j) {
    uint t = t0 + ty + 16u * j;
    if (t >= pc.ntok) continue;
    for (uint i = 0u; i < 4u; ++i) {
      uint r = r0 + tx + 16u * i;
      if (r < pc.rows) y[t * pc.y_stride + pc.y_row0 + r] = acc[i][j];
    }
  }
}
