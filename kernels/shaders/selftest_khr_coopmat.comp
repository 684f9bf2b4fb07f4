#version 450
// selftest_khr_coopmat: one subgroup computes D = A * B for 16x16 f16 matrices A and B (row-major) with one
// 16x16x16 f16 -> f32 KHR cooperative-matrix multiply-add on a zero accumulator, D row-major f32. Not an op:
// tests/kernels/test_fast_paths.cpp compares it with the CPU. Dispatch one work group of one subgroup.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 1) readonly buffer B { float16_t b[]; };
layout(set = 0, binding = 2) writeonly buffer D { float d[]; };

void main() {
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  coopMatLoad(ma, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, b, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  acc = coopMatMulAdd(ma, mb, acc);
  coopMatStore(acc, d, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
