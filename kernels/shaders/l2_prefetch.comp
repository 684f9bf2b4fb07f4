#version 450
// l2_prefetch: reads up to three ranges of 16-byte words and discards them, ROUND loads a thread in flight,
// so that the dispatch after it finds them in the L2 cache. What is read feeds a store that never happens
// (words0 is never 2^32 - 1: the host refuses it), which keeps the loads.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer R0 { uvec4 r0[]; };
layout(set = 0, binding = 1) readonly buffer R1 { uvec4 r1[]; };
layout(set = 0, binding = 2) readonly buffer R2 { uvec4 r2[]; };
layout(set = 0, binding = 3) writeonly buffer Sink { uvec4 sink[]; };
layout(push_constant) uniform Push { uint words0, words1, words2; } pc;

#define ROUND 8u
#define READ_RANGE(BUF, WORDS)                                   \
  for (uint i = first; i < (WORDS); i += ROUND * stride) {      \
    [[unroll]] for (uint u = 0u; u < ROUND; ++u) {               \
      if (i + u * stride < (WORDS)) seen ^= BUF[i + u * stride]; \
    }                                                            \
  }

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint first = gl_GlobalInvocationID.x;
  uvec4 seen = uvec4(0u);
  READ_RANGE(r0, pc.words0)
  READ_RANGE(r1, pc.words1)
  READ_RANGE(r2, pc.words2)
  if (pc.words0 == 0xFFFFFFFFu && seen.x == seen.y) sink[0] = seen;
}
