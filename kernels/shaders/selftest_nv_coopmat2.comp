#version 450
// selftest_nv_coopmat2: what selftest_khr_coopmat computes (D = A * B, 16x16 f16 -> f32, row-major), with
// the matrices loaded and stored through GL_NV_cooperative_matrix2 tensor layouts. SPIR-V 1.6: compiled for
// vulkan1.3. Not an op: tests/kernels/test_fast_paths.cpp compares it with the CPU. Dispatch one work group
// of one subgroup.
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 1) readonly buffer B { float16_t b[]; };
layout(set = 0, binding = 2) writeonly buffer D { float d[]; };

void main() {
  tensorLayoutNV<2> layout16 = createTensorLayoutNV(2);
  layout16 = setTensorLayoutDimensionNV(layout16, 16, 16);  // 16 rows of 16 contiguous elements
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
      coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(layout16, 0, 16, 0, 16));
  coopMatLoadTensorNV(mb, b, 0, sliceTensorLayoutNV(layout16, 0, 16, 0, 16));
  acc = coopMatMulAdd(ma, mb, acc);
  coopMatStoreTensorNV(acc, d, 0, sliceTensorLayoutNV(layout16, 0, 16, 0, 16));
}
