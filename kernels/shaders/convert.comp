#version 450
// convert_f32_f16: out = f16(x), elementwise over `count` values (round to nearest even), packed two values
// per word: `count` is even (the products' rows are). The f16 copy of a product's x for matmul_cm2.comp.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer X { vec2 x[]; };
layout(set = 0, binding = 1) writeonly buffer Out { uint out_pairs[]; };
layout(push_constant) uniform Push { uint pairs; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.pairs) return;
  out_pairs[i] = packFloat2x16(f16vec2(x[i]));
}
