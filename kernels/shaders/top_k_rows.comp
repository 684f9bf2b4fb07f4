#version 450
// top_k_rows: for each row of n floats, its K best (index, value) pairs in rank order: the larger value
// first, the lower index among equal ones, NaN read as -inf; the first k <= K of them are what Sampler's
// top-k keeps of the same row, in its order. Two passes (MERGE, a push constant). Work group (c, row) sorts
// chunk c of the row (CHUNK values in shared memory, a bitonic network) and writes its K best; the merge,
// one work group a row, sorts a window holding the K best so far and the next CHUNK - K of the row's chunk
// candidates, until they are all taken, and writes the K best. Rank order is a strict total order, so the
// chunking changes no result. Padding ranks after every value (-inf at index NONE).
layout(local_size_x_id = 0) in;
#define CHUNK 2048u
#define NONE 0xFFFFFFFFu
layout(set = 0, binding = 0) readonly buffer Values { float values[]; };
layout(set = 0, binding = 1) buffer CandidateValue { float candidate_value[]; };  // [row][chunk][K]
layout(set = 0, binding = 2) buffer CandidateIndex { uint candidate_index[]; };
layout(set = 0, binding = 3) writeonly buffer OutIndex { uint out_index[]; };  // [row][K]
layout(set = 0, binding = 4) writeonly buffer OutValue { float out_value[]; };
layout(push_constant) uniform Push {
  uint n;       // values a row
  uint k;       // K: pairs kept a chunk and written a row (<= CHUNK / 2)
  uint chunks;  // chunks a row
  uint merge;   // 0: chunks -> candidates; 1: a row's candidates -> out
} pc;

shared float window_value[CHUNK];
shared uint window_index[CHUNK];

#define NEG_INF uintBitsToFloat(0xFF800000u)

bool ranks_before(float va, uint ia, float vb, uint ib) {
  return va != vb ? va > vb : ia < ib;
}

// Sorts the window into rank order (a bitonic network; every invocation takes its share of each stage).
void sort_window() {
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  barrier();
  for (uint size = 2u; size <= CHUNK; size <<= 1) {
    for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
      for (uint t = tid; t < CHUNK / 2u; t += wg) {
        uint i = 2u * t - (t & (stride - 1u)), j = i + stride;
        float vi = window_value[i], vj = window_value[j];
        uint ii = window_index[i], ij = window_index[j];
        bool first_half = (i & size) == 0u;  // this run sorts into rank order, the other in reverse
        if (first_half ? ranks_before(vj, ij, vi, ii) : ranks_before(vi, ii, vj, ij)) {
          window_value[i] = vj;
          window_value[j] = vi;
          window_index[i] = ij;
          window_index[j] = ii;
        }
      }
      barrier();
    }
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  if (pc.merge == 0u) {
    uint row = gl_WorkGroupID.y, chunk = gl_WorkGroupID.x, begin = chunk * CHUNK;
    for (uint i = tid; i < CHUNK; i += wg) {
      uint at = begin + i;
      float v = at < pc.n ? values[row * pc.n + at] : NEG_INF;
      window_value[i] = isnan(v) ? NEG_INF : v;
      window_index[i] = at < pc.n ? at : NONE;
    }
    sort_window();
    uint out_at = (row * pc.chunks + chunk) * pc.k;
    for (uint i = tid; i < pc.k; i += wg) {
      candidate_value[out_at + i] = window_value[i];
      candidate_index[out_at + i] = window_index[i];
    }
    return;
  }
  uint row = gl_WorkGroupID.x, total = pc.chunks * pc.k, from = row * total;
  for (uint i = tid; i < pc.k; i += wg) {
    window_value[i] = NEG_INF;
    window_index[i] = NONE;
  }
  for (uint taken = 0u; taken < total; taken += CHUNK - pc.k) {
    barrier();  // the last sort's reads of the slots refilled below are done
    for (uint i = pc.k + tid; i < CHUNK; i += wg) {
      uint at = taken + i - pc.k;
      window_value[i] = at < total ? candidate_value[from + at] : NEG_INF;
      window_index[i] = at < total ? candidate_index[from + at] : NONE;
    }
    sort_window();
  }
  for (uint i = tid; i < pc.k; i += wg) {
    out_index[row * pc.k + i] = window_index[i];
    out_value[row * pc.k + i] = window_value[i];
  }
}
