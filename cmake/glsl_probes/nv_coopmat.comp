#version 450
// Probe: GL_NV_cooperative_matrix (matmul_coopmat_*), one 16x16x16 f16 -> f32 multiply-add.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Halves { float16_t h[]; };
layout(set = 0, binding = 1) buffer Floats { float f[]; };
void main() {
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  coopMatLoadNV(a, h, 0, 16, false);
  c = coopMatMulAddNV(a, a, c);
  coopMatStoreNV(c, f, 0, 16, false);
}
