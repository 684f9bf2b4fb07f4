#version 450
// reduce_splits: the split-K sum of matmul_coopmat.comp: y[t * y_stride + r] = sum over s in increasing
// order of partial[s * plane + t * rows + r], for rows x ntok outputs (a fixed order: deterministic for a
// fixed split count).
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Partial { float partial[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint rows;
  uint ntok;
  uint splits;
  uint plane;     // floats between splits in partial (ntok * rows)
  uint y_stride;  // floats between tokens in y
} pc;
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i >= pc.rows * pc.ntok) return;
  uint t = i / pc.rows, r = i % pc.rows;
  float s = 0.0;
  for (uint c = 0u; c < pc.splits; ++c) s += partial[c * pc.plane + i];
  y[t * pc.y_stride + r] = s;
}
