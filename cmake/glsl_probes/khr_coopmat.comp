#version 450
// Probe: GL_KHR_cooperative_matrix, one 16x16x16 f16 -> f32 multiply-add.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Halves { float16_t h[]; };
layout(set = 0, binding = 1) buffer Floats { float f[]; };
void main() {
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b;
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c =
      coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  coopMatLoad(a, h, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, h, 256, 16, gl_CooperativeMatrixLayoutRowMajor);
  c = coopMatMulAdd(a, b, c);
  coopMatStore(c, f, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
