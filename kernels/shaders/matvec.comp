#version 450
// matvec_<type>: y[t][r] = dot(W[r, :], x[t, :]) for a few tokens t. One work group per weight row; each
// thread decodes 32-value units of the row (strided by the group size) once and applies them to every token.
// Batch invariance (the --deterministic contract): a token's sum is built by the same instruction sequence
// whatever the token count (per-token accumulators, explicit fma, all tokens reduced by the same subgroup +
// shared-memory tree, tokens grouped MAX_COLS per work group along z), so a token alone and in any batch
// gets bit-identical results on one device with one work-group size.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;

#define MAX_COLS 8u
#define MAX_SUBGROUPS 64u

layout(set = 0, binding = 0) readonly buffer W { uint wq[]; };
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;       // output features (rows of W)
  uint k;          // input features (row length)
  uint ntok;       // tokens
  uint row_bytes;  // bytes per weight row
  uint x_stride;   // floats between tokens in x
  uint y_stride;   // floats between tokens in y
  uint y_row0;    // row offset of this dispatch in y (weights split by rows)
  uint w_offset;  // byte offset of row 0 in the weight binding (bindings are aligned down)
} pc;

#include "matvec_blocks.glsl"

shared float partial[MAX_SUBGROUPS * MAX_COLS];

void main() {
  uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= pc.rows) return;  // uniform across the work group
  uint tok0 = gl_WorkGroupID.z * MAX_COLS;
  uint ncols = min(MAX_COLS, pc.ntok - tok0);
  uint tid = gl_LocalInvocationID.x;
  uint rb = pc.w_offset + row * pc.row_bytes;
  uint groups = (pc.k + 7u) / 8u;
  uint units = (groups + 3u) / 4u;

  precise float acc[MAX_COLS];
  for (uint t = 0u; t < MAX_COLS; ++t) acc[t] = 0.0;

  for (uint u = tid; u < units; u += gl_WorkGroupSize.x) {
    for (uint gg = 0u; gg < 4u; ++gg) {
      uint g = 4u * u + gg;
      if (g >= groups) break;
      float v[8];
      decode8(rb, g, pc.k, v);
      uint e0 = 8u * g;
      for (uint t = 0u; t < MAX_COLS; ++t) {
        if (t >= ncols) break;
        uint xo = (tok0 + t) * pc.x_stride + e0;
        for (uint i = 0u; i < 8u; ++i) {
#if WTYPE == T_F32 || WTYPE == T_F16 || WTYPE == T_BF16
          float xv = (e0 + i < pc.k) ? x[xo + i] : 0.0;
#else
          float xv = x[xo + i];
#endif
          acc[t] = fma(v[i], xv, acc[t]);
        }
      }
    }
  }

  for (uint t = 0u; t < MAX_COLS; ++t) {
    float s = subgroupAdd(acc[t]);
    if (subgroupElect()) partial[gl_SubgroupID * MAX_COLS + t] = s;
  }
  barrier();
  if (tid < ncols) {
    precise float s = 0.0;
    for (uint sg = 0u; sg < gl_NumSubgroups; ++sg) s += partial[sg * MAX_COLS + tid];
    y[(tok0 + tid) * pc.y_stride + pc.y_row0 + row] = s;
  }
}
