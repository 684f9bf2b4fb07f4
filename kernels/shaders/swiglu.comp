#version 450
// swiglu: out = silu(gate) * up = gate / (1 + exp(-gate)) * up, elementwise over `count` values. With
// joined != 0, gate and up are the two halves of each token's row of one product of 2 * joined outputs
// (the same buffer bound twice): value i = (token t, column c) reads gate at t * 2 joined + c and up
// `joined` later.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Gate { float gate[]; };
layout(set = 0, binding = 1) readonly buffer Up { float up[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_values[]; };
layout(push_constant) uniform Push {
  uint count;
  uint joined;  // 0: gate and up are separate arrays of count values
} pc;
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.count) return;
  uint gi = i, ui = i;
  if (pc.joined != 0u) {
    gi = i + (i / pc.joined) * pc.joined;
    ui = gi + pc.joined;
  }
  float g = gate[gi];
  out_values[i] = g / (1.0 + exp(-g)) * up[ui];
}
