#version 450
// Probe: GL_EXT_integer_dot_product, packed 4x8-bit signed and mixed-signedness dot products.
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Ints { int i[]; };
layout(set = 0, binding = 1) buffer Uints { uint u[]; };
void main() {
  uint n = gl_GlobalInvocationID.x;
  i[n] = dotPacked4x8EXT(i[n + 1], i[n + 2]) + dotPacked4x8EXT(i[n + 3], u[n]);
}
