#version 450
// rms_norm: y = x / sqrt(mean(x^2) + eps) [* w], one work group per row. Rows are addressed as
// (r / heads) * stride + (r % heads) * n, so per-head norms (qwen3 q/k norm inside a fused QKV row) and
// plain contiguous rows (heads = 1, stride = n) use the same shader. The reduction is a fixed tree over the
// work group's shared memory: a row's result does not depend on how many rows run together.
// The ADD_RESIDUAL build (rms_norm_add_f32) first adds a residual into x in place, x += r, and normalizes the
// sum: the residual connection and the next norm in one dispatch (the same values as add then rms_norm;
// each invocation re-reads only the elements it wrote itself).
layout(local_size_x_id = 0) in;
#ifdef ADD_RESIDUAL
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(set = 0, binding = 3) readonly buffer R { float residual[]; };
#else
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
#endif
layout(set = 0, binding = 1) readonly buffer W { float w[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
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
  float sum = 0.0;
  for (uint i = lid; i < pc.n; i += gl_WorkGroupSize.x) {
#ifdef ADD_RESIDUAL
    x[xb + i] += residual[xb + i];
#endif
    sum += x[xb + i] * x[xb + i];
  }
  partial[lid] = sum;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) partial[lid] += partial[lid + s];
    barrier();
  }
  float scale = inversesqrt(partial[0] / float(pc.n) + pc.eps);
  for (uint i = lid; i < pc.n; i += gl_WorkGroupSize.x) {
    float v = x[xb + i] * scale;
    y[yb + i] = pc.has_weight != 0u ? v * w[i] : v;
  }
}
