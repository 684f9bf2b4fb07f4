#version 450
// add_bias: x[r * stride + c] += bias[c] for c < n, in place (qwen2 QKV biases).
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform Push { uint rows; uint n; uint stride; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.rows * pc.n) return;
  uint r = i / pc.n;
  uint c = i % pc.n;
  x[r * pc.stride + c] += bias[c];
}
