#version 450
// read_probe: reads a buffer once, 16 bytes per load, grid-stride, and writes one word per invocation (the
// XOR of what it read) so the loads cannot be optimized away. Measures the device's read bandwidth: the
// physical bound of the decode step, which reads every weight once.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Sink { uint sink[]; };
layout(push_constant) uniform Push { uint count; } pc;  // uvec4 elements to read
void main() {
  uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uvec4 acc = uvec4(0u);
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += threads) acc ^= src[i];
  sink[gl_GlobalInvocationID.x] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
