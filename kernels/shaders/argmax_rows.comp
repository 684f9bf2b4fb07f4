#version 450
// argmax_rows: the index of the largest of each row's n floats, NaN read as -inf and ties (and a row of
// nothing but -inf and NaN) going to the lowest index: what Sampler's greedy picks from the same row. Two
// passes (MERGE, a push constant): work group (c, row) takes chunk c of the row, each thread keeping the
// first strictly larger of its values (UNROLL loads in flight), then a fixed tree over shared memory that
// prefers the larger value, then the lower index, writes the chunk's best; the merge, one work group a row,
// reduces the row's chunks the same way. Larger-then-lower-index is associative, so the chunking changes no
// result, and a row's 0.5 MB is read by many work groups at once instead of one.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#define UNROLL 4u
#define NONE 0xFFFFFFFFu
layout(set = 0, binding = 0) readonly buffer Values { float values[]; };
layout(set = 0, binding = 1) buffer ChunkValue { float chunk_value[]; };  // [row][chunk]
layout(set = 0, binding = 2) buffer ChunkIndex { uint chunk_index[]; };
layout(set = 0, binding = 3) writeonly buffer Out { uint out_index[]; };
layout(push_constant) uniform Push {
  uint n;       // values a row
  uint chunk;   // values a chunk
  uint chunks;  // chunks a row
  uint merge;   // 0: chunks -> chunk_value/chunk_index; 1: a row's chunks -> out_index
} pc;

shared float best_value[256];
shared uint best_index[256];

#define NEG_INF uintBitsToFloat(0xFF800000u)

// The larger value, or the lower index of equal ones (NONE: no value yet).
void offer(inout float value, inout uint index, float v, uint i) {
  if (v > value || (v == value && i < index)) {
    value = v;
    index = i;
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  float value = NEG_INF;  // NaN and -inf never replace it
  uint index = NONE;
  if (pc.merge == 0u) {
    uint row = gl_WorkGroupID.y, begin = gl_WorkGroupID.x * pc.chunk;
    uint end = min(begin + pc.chunk, pc.n);
    for (uint i0 = begin + tid; i0 < end; i0 += UNROLL * wg) {
      float v[UNROLL];
      [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
        uint i = i0 + u * wg;
        v[u] = i < end ? values[row * pc.n + i] : NEG_INF;
      }
      [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
        if (v[u] > value) {  // increasing indices: the first of equal values stays
          value = v[u];
          index = i0 + u * wg;
        }
      }
    }
  } else {
    uint row = gl_WorkGroupID.x;
    for (uint c = tid; c < pc.chunks; c += wg)
      offer(value, index, chunk_value[row * pc.chunks + c], chunk_index[row * pc.chunks + c]);
  }
  best_value[tid] = value;
  best_index[tid] = index;
  barrier();
  for (uint s = wg / 2u; s > 0u; s >>= 1) {
    if (tid < s) {
      float v = best_value[tid];
      uint i = best_index[tid];
      offer(v, i, best_value[tid + s], best_index[tid + s]);
      best_value[tid] = v;
      best_index[tid] = i;
    }
    barrier();
  }
  if (tid != 0u) return;
  if (pc.merge == 0u) {
    uint at = gl_WorkGroupID.y * pc.chunks + gl_WorkGroupID.x;
    chunk_value[at] = best_value[0];
    chunk_index[at] = best_index[0];
  } else {
    out_index[gl_WorkGroupID.x] = best_index[0] == NONE ? 0u : best_index[0];
  }
}
