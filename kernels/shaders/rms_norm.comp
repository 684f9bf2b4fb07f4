#version 450
// rms_norm: y = x / sqrt(mean(x^2) + eps) [* w], one work group per row. Rows are addressed as
// (r / heads) * stride + (r % heads) * n, so per-head norms (qwen3 q/k norm inside a fused QKV row) and
// plain contiguous rows (heads = 1, stride = n) use the same shader. The reduction is a fixed tree over the
// work group's shared memory: a row's result does not depend on how many rows run together.
// The ADD_RESIDUAL build (rms_norm_add_f32) first adds a residual into x in place, x += r, and normalizes the
// sum: the residual connection and the next norm in one dispatch (the same values as add then rms_norm;
// each invocation re-reads only the elements it wrote itself).
// The HALF_OUT builds (rms_norm_f32_f16, rms_norm_add_f32_f16) write y as f16, two values a word (n and
// y_stride even), rounded as convert.comp rounds the f32 values: the f16 x of a tensor-core product without
// a conversion pass.
// Each thread handles UNROLL elements per pass with every load issued before any store: a single row (the
// decode step) then costs a few memory round trips instead of one per work-group-sized slice. (y may be x:
// the per-head norm runs in place; every element is read and written by the same invocation.)
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;
#define UNROLL 4u
#ifdef ADD_RESIDUAL
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(set = 0, binding = 3) readonly buffer R { float residual[]; };
#else
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
#endif
layout(set = 0, binding = 1) readonly buffer W { float w[]; };
#ifdef HALF_OUT
layout(set = 0, binding = 2) writeonly buffer Y { uint y_pairs[]; };
#else
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
#endif
layout(push_constant) uniform Push {
  uint rows;
  uint n;
  uint heads;       // rows per group
  uint x_stride;    // floats between groups in x
  uint y_stride;    // floats between groups in y
  uint has_weight;
  float eps;
} pc;
shared float partial[gl_WorkGroupSize.x];
void main() {
  uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (r >= pc.rows) return;  // uniform per work group
  uint lid = gl_LocalInvocationID.x;
  uint xb = (r / pc.heads) * pc.x_stride + (r % pc.heads) * pc.n;
  uint yb = (r / pc.heads) * pc.y_stride + (r % pc.heads) * pc.n;
  uint wg = gl_WorkGroupSize.x;
  float sum = 0.0;
  for (uint i0 = lid; i0 < pc.n; i0 += UNROLL * wg) {
    float v[UNROLL];
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
      uint i = i0 + u * wg;
      v[u] = i < pc.n ? x[xb + i] : 0.0;
#ifdef ADD_RESIDUAL
      if (i < pc.n) v[u] += residual[xb + i];
#endif
    }
#ifdef ADD_RESIDUAL
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u)
      if (i0 + u * wg < pc.n) x[xb + i0 + u * wg] = v[u];
#endif
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u) sum += v[u] * v[u];
  }
  partial[lid] = sum;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) partial[lid] += partial[lid + s];
    barrier();
  }
  float scale = inversesqrt(partial[0] / float(pc.n) + pc.eps);
#ifdef HALF_OUT
  for (uint p = lid; p < pc.n / 2u; p += wg) {
    uint i = 2u * p;
    vec2 v = vec2(x[xb + i], x[xb + i + 1u]);
    vec2 r = pc.has_weight != 0u ? (v * scale) * vec2(w[i], w[i + 1u]) : v * scale;
    y_pairs[(yb + i) / 2u] = packFloat2x16(f16vec2(r));
  }
#else
  for (uint i0 = lid; i0 < pc.n; i0 += UNROLL * wg) {
    float v[UNROLL], g[UNROLL];
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
      uint i = i0 + u * wg;
      v[u] = i < pc.n ? x[xb + i] : 0.0;
      g[u] = (i < pc.n && pc.has_weight != 0u) ? w[i] : 1.0;
    }
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u)
      if (i0 + u * wg < pc.n) y[yb + i0 + u * wg] = pc.has_weight != 0u ? (v[u] * scale) * g[u] : v[u] * scale;
  }
#endif
}
