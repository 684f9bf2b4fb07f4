#version 450
// swiglu: out = silu(gate) * up = gate / (1 + exp(-gate)) * up, elementwise over `count` values.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Gate { float gate[]; };
layout(set = 0, binding = 1) readonly buffer Up { float up[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_values[]; };
layout(push_constant) uniform Push { uint count; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.count) return;
  float g = gate[i];
  out_values[i] = g / (1.0 + exp(-g)) * up[i];
}
