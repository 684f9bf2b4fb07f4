#version 450
// quantize_q8[_norm]: x quantized as matvec_q8 multiplies it (q8_activations.glsl), once for every product
// that reads it. Work group t takes token t: every 16 values (times norm_weight with NORM) become bytes and
// (scale, sum as float bits); with NORM each group's sum of squares of x (sum_squares16) is written too,
// from which the product takes the token's 1 / rms, as a product that writes x quantized (matvec_q8's
// NORM_OUT) writes them: a token gets the same bits whichever wrote it.
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 1) writeonly buffer XQ { uvec4 xq[]; };
layout(set = 0, binding = 2) writeonly buffer XDS { vec2 xds[]; };
#ifdef NORM
layout(set = 0, binding = 3) readonly buffer N { vec4 norm4[]; };
layout(set = 0, binding = 4) writeonly buffer SS { float sum_squares[]; };  // as XDS: a float a group
#endif

layout(push_constant) uniform Push {
  uint k;           // values per token, a multiple of 16
  uint x_stride;    // floats between tokens in x (a multiple of 4)
  uint out_stride;  // values between tokens in the output (a multiple of 16)
} pc;

#include "q8_activations.glsl"

void main() {
  uint t = gl_WorkGroupID.x;
  uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  uint x0 = t * pc.x_stride / 4u, o0 = t * pc.out_stride / 16u;
  for (uint g = tid; g < pc.k / 16u; g += gl_WorkGroupSize.x) {
    vec4 v0 = x4[x0 + 4u * g], v1 = x4[x0 + 4u * g + 1u], v2 = x4[x0 + 4u * g + 2u], v3 = x4[x0 + 4u * g + 3u];
#ifdef NORM
    sum_squares[o0 + g] = sum_squares16(v0, v1, v2, v3);
    v0 *= norm4[4u * g];
    v1 *= norm4[4u * g + 1u];
    v2 *= norm4[4u * g + 2u];
    v3 *= norm4[4u * g + 3u];
#endif
    XGroup q = quantize16(v0, v1, v2, v3);
    xq[o0 + g] = q.q;
    xds[o0 + g] = vec2(q.d, intBitsToFloat(q.s));
  }
}
