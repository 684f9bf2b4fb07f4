#version 450
// Probe: GL_NV_cooperative_matrix2 (workgroup scope, tensor-layout loads); needs SPIR-V 1.6 (vulkan1.3).
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 128) in;
layout(set = 0, binding = 0) buffer Halves { float16_t h[]; };
layout(set = 0, binding = 1) buffer Floats { float f[]; };
void main() {
  tensorLayoutNV<2> layout_a = createTensorLayoutNV(2);
  layout_a = setTensorLayoutDimensionNV(layout_a, 64, 64);
  coopmat<float16_t, gl_ScopeWorkgroup, 64, 32, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeWorkgroup, 32, 64, gl_MatrixUseB> b;
  coopMatLoadTensorNV(a, h, 0, sliceTensorLayoutNV(layout_a, 0, 64, 0, 32));
  coopMatLoadTensorNV(b, h, 0, sliceTensorLayoutNV(layout_a, 0, 32, 0, 64));
  coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator> c =
      coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator>(0.0);
  c = coopMatMulAdd(a, b, c);
  coopMatStoreTensorNV(c, f, 0, sliceTensorLayoutNV(layout_a, 0, 64, 0, 64));
}
