#version 450
// swiglu: out = silu(gate) * up = gate / (1 + exp(-gate)) * up, elementwise over `count` values. With
// joined != 0, gate and up are the two halves of each token's row of one product of 2 * joined outputs
// (the same buffer bound twice): value i = (token t, column c) reads gate at t * 2 joined + c and up
// `joined` later.
// The HALF_OUT build (swiglu_f32_f16) writes out as f16, two values a word (count and joined even),
// rounded as convert.comp rounds the f32 values: the f16 x of a tensor-core product without a conversion.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Gate { float gate[]; };
layout(set = 0, binding = 1) readonly buffer Up { float up[]; };
#ifdef HALF_OUT
layout(set = 0, binding = 2) writeonly buffer Out { uint out_pairs[]; };
#else
layout(set = 0, binding = 2) writeonly buffer Out { float out_values[]; };
#endif
layout(push_constant) uniform Push {
  uint count;
  uint joined;  // 0: gate and up are separate arrays of count values
} pc;
float silu_times_up(uint i) {
  uint gi = i, ui = i;
  if (pc.joined != 0u) {
    gi = i + (i / pc.joined) * pc.joined;
    ui = gi + pc.joined;
  }
  float g = gate[gi];
  return g / (1.0 + exp(-g)) * up[ui];
}

void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#ifdef HALF_OUT
  if (2u * i >= pc.count) return;  // one pair an invocation
  out_pairs[i] = packFloat2x16(f16vec2(silu_times_up(2u * i), silu_times_up(2u * i + 1u)));
#else
  if (i >= pc.count) return;
  out_values[i] = silu_times_up(i);
#endif
}
