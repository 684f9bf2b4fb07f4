#version 450
// read_probe: reads a buffer once, 16 bytes per load, grid-stride, and writes one word per invocation (the
// XOR of what it read) so the loads cannot be optimized away. Measures the device's read bandwidth: the
// physical bound of the decode step, which reads every weight once. UNROLL loads go out together a round
// (each `threads` elements apart): one load a thread in flight can leave a device short of the bytes in
// flight its bandwidth needs.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 1u;  // 1 to 8
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Sink { uint sink[]; };
layout(push_constant) uniform Push { uint count; } pc;  // uvec4 elements to read
void main() {
  uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uvec4 acc = uvec4(0u);
  uint i = gl_GlobalInvocationID.x;
  // Whole rounds while the round's last element exists (no overflow: count + 8 threads < 2^32, checked on
  // the host), then single loads.
  for (; i + (UNROLL - 1u) * threads < pc.count; i += UNROLL * threads) {
    uvec4 v[8];
    [[unroll]] for (uint j = 0u; j < 8u; ++j)
      if (j < UNROLL) v[j] = src[i + j * threads];
    [[unroll]] for (uint j = 0u; j < 8u; ++j)
      if (j < UNROLL) acc ^= v[j];
  }
  for (; i < pc.count; i += threads) acc ^= src[i];
  sink[gl_GlobalInvocationID.x] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
