#version 450
// norm_input: the input of a batch's fused normed products (matvec.comp's batched NORM_IN builds): for each
// token (a work group each), x times the norm's weights and the sum of squares of x, both as a one-token
// NORM_IN product's work group computes them from its loads (the same work-group size, so the same threads
// take the same groups of 8 in the same order; norm_group.glsl; one subgroup reduction, then the subgroups'
// sums in order). A token's product then gets the bits of the one-token build, as --deterministic needs.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // matvec_workgroup_size

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 0) readonly buffer XV { vec4 x4[]; };
layout(set = 0, binding = 1) readonly buffer NW { float norm_w[]; };
layout(set = 0, binding = 1) readonly buffer NWV { vec4 norm_w4[]; };
layout(set = 0, binding = 2) writeonly buffer XW { float xw[]; };       // token t at t * out_stride
layout(set = 0, binding = 3) writeonly buffer Sums { float sums[]; };  // a float a token

layout(push_constant) uniform Push {
  uint k;  // values a token
  uint x_stride;
  uint out_stride;
} pc;

#include "norm_group.glsl"

#define MAX_SUBGROUPS 64u
shared float sum_sq_of[MAX_SUBGROUPS];

void main() {
  uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  uint groups = (pc.k + 7u) / 8u;
  precise float sum_sq = 0.0;
  for (uint g = tid; g < groups; g += gl_WorkGroupSize.x) {
    uint e0 = 8u * g, xo = t * pc.x_stride + e0;
    float xv[8];
    if (e0 + 8u <= pc.k && (xo & 3u) == 0u) {
      vec4 a = x4[xo / 4u], b = x4[xo / 4u + 1u];
      xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w;
      xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
    } else {
      for (uint i = 0u; i < 8u; ++i) xv[i] = (e0 + i < pc.k) ? x[xo + i] : 0.0;
    }
    norm_group(xv, e0, pc.k, sum_sq);
    uint o = t * pc.out_stride + e0;
    for (uint i = 0u; i < 8u; ++i)
      if (e0 + i < pc.k) xw[o + i] = xv[i];
  }
  float ss = subgroupAdd(sum_sq);
  if (subgroupElect()) sum_sq_of[gl_SubgroupID] = ss;
  barrier();
  if (tid == 0u) {
    precise float total = 0.0;
    for (uint sg = 0u; sg < gl_NumSubgroups; ++sg) total += sum_sq_of[sg];
    sums[t] = total;
  }
}
