#version 450
// quantize_q8[_norm]: x quantized as matvec_q8 multiplies it (q8_activations.glsl), once for every product
// that reads it. Work group t takes token t: every 16 values (times norm_weight with NORM) become bytes and
// (scale, sum as float bits); with NORM the token's 1 / rms is written apart, its sum of squares taken in one
// fixed order (sum_of_squares with this work-group size, then the subgroups' sums in order), so a token gets
// the same bits alone and in any batch.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // fixed per device (op_registry.cpp): the sum of squares' order follows it

layout(set = 0, binding = 0) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 1) writeonly buffer XQ { uvec4 xq[]; };
layout(set = 0, binding = 2) writeonly buffer XDS { vec2 xds[]; };
#ifdef NORM
layout(set = 0, binding = 3) readonly buffer N { vec4 norm4[]; };
layout(set = 0, binding = 4) writeonly buffer R { float inv_rms_of[]; };
#endif

layout(push_constant) uniform Push {
  uint k;           // values per token, a multiple of 16
  uint x_stride;    // floats between tokens in x (a multiple of 4)
  uint out_stride;  // values between tokens in the output (a multiple of 16)
  float eps;
} pc;

#include "q8_activations.glsl"

#ifdef NORM
// This thread's part of the sum of squares of row x4[row4 .. row4 + n4) (vec4s): vec4s tid, tid + threads,
// ... with one fma chain. The work group then sums the parts with subgroupAdd, and the subgroups' sums in
// order: one fixed order.
float sum_of_squares(uint row4, uint n4, uint tid, uint threads) {
  precise float ss = 0.0;
  for (uint i = tid; i < n4; i += threads) {
    vec4 v = x4[row4 + i];
    ss = fma(v.x, v.x, ss);
    ss = fma(v.y, v.y, ss);
    ss = fma(v.z, v.z, ss);
    ss = fma(v.w, v.w, ss);
  }
  return ss;
}
#endif

shared float partial[64];

void main() {
  uint t = gl_WorkGroupID.x;
  uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  uint x0 = t * pc.x_stride / 4u, o0 = t * pc.out_stride / 16u;
  for (uint g = tid; g < pc.k / 16u; g += gl_WorkGroupSize.x) {
    vec4 v0 = x4[x0 + 4u * g], v1 = x4[x0 + 4u * g + 1u], v2 = x4[x0 + 4u * g + 2u], v3 = x4[x0 + 4u * g + 3u];
#ifdef NORM
    v0 *= norm4[4u * g];
    v1 *= norm4[4u * g + 1u];
    v2 *= norm4[4u * g + 2u];
    v3 *= norm4[4u * g + 3u];
#endif
    XGroup q = quantize16(v0, v1, v2, v3);
    xq[o0 + g] = q.q;
    xds[o0 + g] = vec2(q.d, intBitsToFloat(q.s));
  }
#ifdef NORM
  float s = subgroupAdd(sum_of_squares(x0, pc.k / 4u, tid, gl_WorkGroupSize.x));
  if (subgroupElect()) partial[gl_SubgroupID] = s;
  barrier();
  if (tid == 0u) {
    precise float sq = 0.0;
    for (uint j = 0u; j < gl_NumSubgroups; ++j) sq += partial[j];
    inv_rms_of[t] = inversesqrt(sq / float(pc.k) + pc.eps);
  }
#endif
}
