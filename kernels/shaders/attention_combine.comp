#version 450
// attention_combine: merges the splits written by attention.comp for one (head, token) in increasing split
// order (a fixed order, so results are deterministic for a fixed split size) and writes the normalised
// output out[t][h * head_dim + d].
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Partial { float partial[]; };
layout(set = 0, binding = 1) readonly buffer Tokens { uvec2 tokens[]; };  // (page-table offset, position)
layout(set = 0, binding = 2) writeonly buffer Out { float o[]; };

layout(push_constant) uniform Push {
  uint n_heads;
  uint head_dim;
  uint chunk;
  uint max_splits;
  uint out_stride;  // floats between tokens in out
} pc;

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  uint hd = pc.head_dim;
  uint splits = tokens[t].y / pc.chunk + 1u;
  uint base = (t * pc.n_heads + h) * pc.max_splits * (hd + 2u);
  float mx = partial[base];
  for (uint c = 1u; c < splits; ++c) mx = max(mx, partial[base + c * (hd + 2u)]);
  float l = 0.0;
  for (uint c = 0u; c < splits; ++c) {
    uint b = base + c * (hd + 2u);
    l += partial[b + 1u] * exp(partial[b] - mx);
  }
  for (uint d = gl_LocalInvocationID.x; d < hd; d += gl_WorkGroupSize.x) {
    float a = 0.0;
    for (uint c = 0u; c < splits; ++c) {
      uint b = base + c * (hd + 2u);
      a += partial[b + 2u + d] * exp(partial[b] - mx);
    }
    o[t * pc.out_stride + h * hd + d] = a / l;
  }
}
