#version 450
// rope: rotates pairs of the first rope_dims values of every head of every token, in place.
// Normal mode pairs (2i, 2i+1); neox mode pairs (i, i + rope_dims/2). Angle = pos * base^(-2i/rope_dims),
// divided by freq_factors[i] when given (llama3 rope_freqs). Token t's position is positions[t] (a batch
// may hold tokens of several sequences). One invocation per (token, head, pair).
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Pos { int positions[]; };
layout(set = 0, binding = 2) readonly buffer Factors { float factors[]; };
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_heads;
  uint head_dim;
  uint rope_dims;     // even, <= head_dim
  uint token_stride;  // floats between tokens (heads are contiguous, head_dim apart)
  uint neox;
  uint has_factors;
  float freq_base;
} pc;
#include "rope.glsl"
void main() {
  uint half_dims = pc.rope_dims / 2u;
  uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (idx >= pc.n_tokens * pc.n_heads * half_dims) return;
  uint i = idx % half_dims;
  uint h = (idx / half_dims) % pc.n_heads;
  uint t = idx / (half_dims * pc.n_heads);
  uint base = t * pc.token_stride + h * pc.head_dim;
  uint a = base + (pc.neox != 0u ? i : 2u * i);
  uint b = a + (pc.neox != 0u ? half_dims : 1u);
  float factor = pc.has_factors != 0u ? factors[i] : 1.0;
  vec2 r = rope_rotate(vec2(x[a], x[b]), i, pc.rope_dims, pc.freq_base, factor, positions[t]);
  x[a] = r.x;
  x[b] = r.y;
}
