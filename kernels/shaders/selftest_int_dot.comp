#version 450
// selftest_int_dot: per element i, the packed 4x8-bit dot products of a[i] and b[i] with both operands
// signed (result.x) and with b[i]'s bytes unsigned (result.y). Not an op: tests/kernels/test_fast_paths.cpp
// checks with it that the compiler, the device feature and the arithmetic agree with the CPU.
#extension GL_EXT_integer_dot_product : require

layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer A { int a[]; };
layout(set = 0, binding = 1) readonly buffer B { int b[]; };
layout(set = 0, binding = 2) writeonly buffer Result { ivec2 result[]; };
layout(push_constant) uniform Push { uint count; } pc;

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.count) return;
  result[i] = ivec2(dotPacked4x8EXT(a[i], b[i]), dotPacked4x8EXT(a[i], uint(b[i])));
}
