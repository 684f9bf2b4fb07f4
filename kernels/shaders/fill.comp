#version 450
// Fills a float buffer with a constant; the smallest shader, used to test the pipeline machinery.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) writeonly buffer Out { float data[]; };
layout(push_constant) uniform Push { uint count; float value; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.count) data[i] = pc.value;
}
