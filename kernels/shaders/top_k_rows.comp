#version 450
// top_k_rows: for each row of n floats, its K best (index, value) pairs in rank order: the larger value
// first, the lower index among equal ones, NaN read as -inf; the first k <= K of them are what Sampler's
// top-k keeps of the same row, in its order. Two passes (MERGE, a push constant) over a window of CHUNK
// slots in shared memory, seen as CHUNK / P lists of P = bit_ceil(K) slots. Work group (c, row) loads chunk c
// of the row, sorts each list (a bitonic network), merges the lists into list 0 and writes its first K. The
// merge, one work group a row, keeps the best so far in list 0 and fills the other lists with the next
// chunks' K best (padded to P) until all are merged. Lists merge pairwise in a tree: a half-cleaner keeps the
// better P of two sorted lists in the first (a bitonic sequence), whose bitonic merge sorts it: 1 + log2(P)
// stages a tree level, instead of sorting the whole window again. Rank order is a strict total order, so
// neither the chunking nor the tree changes a result. Padding ranks after every value (-inf at index NONE).
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

// Slots i and j (i < j) in rank order (`forward`) or in reverse.
void order_pair(uint i, uint j, bool forward) {
  float vi = window_value[i], vj = window_value[j];
  uint ii = window_index[i], ij = window_index[j];
  if (forward ? ranks_before(vj, ij, vi, ii) : ranks_before(vi, ii, vj, ij)) {
    window_value[i] = vj;
    window_value[j] = vi;
    window_index[i] = ij;
    window_index[j] = ii;
  }
}

// Sorts each list of p = 2^log_p slots into rank order (runs of the network alternate directions until
// the last size, which sorts every list forward).
void sort_lists(uint log_p) {
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, p = 1u << log_p;
  barrier();
  for (uint size = 2u; size <= p; size <<= 1) {
    for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
      for (uint t = tid; t < CHUNK / 2u; t += wg) {
        uint i = 2u * t - (t & (stride - 1u));
        order_pair(i, i + stride, size == p || (i & size) == 0u);
      }
      barrier();
    }
  }
}

// Merges lists 0 .. count - 1 (each of p = 2^log_p slots in rank order) into list 0, in rank order: at
// tree level `span`, list a = 2 span q keeps the better p of itself and list a + span (where there is one).
void merge_lists(uint count, uint log_p) {
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, p = 1u << log_p;
  for (uint span = 1u; span < count; span <<= 1) {
    uint pairs = (count + span - 1u) / (2u * span);  // the q with 2 span q + span < count
    // Half-cleaner: slot j of a against slot p - 1 - j of b; list a ends bitonic, holding the better p.
    for (uint t = tid; t < pairs << log_p; t += wg) {
      uint a = (2u * span * (t >> log_p)) << log_p, j = t & (p - 1u);
      uint i = a + j, o = a + (span << log_p) + p - 1u - j;
      float vo = window_value[o];
      uint io = window_index[o];
      if (ranks_before(vo, io, window_value[i], window_index[i])) {
        window_value[i] = vo;
        window_index[i] = io;
      }
    }
    barrier();
    // Bitonic merge of each list a into rank order.
    for (uint stride = p >> 1; stride > 0u; stride >>= 1) {
      for (uint t = tid; t < pairs << (log_p - 1u); t += wg) {
        uint a = (2u * span * (t >> (log_p - 1u))) << log_p, u = t & ((p >> 1) - 1u);
        uint i = a + 2u * u - (u & (stride - 1u));
        order_pair(i, i + stride, true);
      }
      barrier();
    }
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint log_p = pc.k <= 1u ? 0u : uint(findMSB(pc.k - 1u)) + 1u, p = 1u << log_p, lists = CHUNK >> log_p;
  if (pc.merge == 0u) {
    uint row = gl_WorkGroupID.y, chunk = gl_WorkGroupID.x, begin = chunk * CHUNK;
    for (uint i = tid; i < CHUNK; i += wg) {
      uint at = begin + i;
      float v = at < pc.n ? values[row * pc.n + at] : NEG_INF;
      window_value[i] = isnan(v) ? NEG_INF : v;
      window_index[i] = at < pc.n ? at : NONE;
    }
    sort_lists(log_p);
    merge_lists(lists, log_p);
    uint out_at = (row * pc.chunks + chunk) * pc.k;
    for (uint i = tid; i < pc.k; i += wg) {
      candidate_value[out_at + i] = window_value[i];
      candidate_index[out_at + i] = window_index[i];
    }
    return;
  }
  uint row = gl_WorkGroupID.x, from = row * pc.chunks * pc.k;
  // Round 1 fills every list; later rounds keep list 0, the best so far.
  for (uint next = 0u, first = 0u; next < pc.chunks; first = 1u) {
    uint load = min(lists - first, pc.chunks - next);
    for (uint t = tid; t < load << log_p; t += wg) {
      uint c = next + (t >> log_p), j = t & (p - 1u), at = from + c * pc.k + j;
      window_value[(first << log_p) + t] = j < pc.k ? candidate_value[at] : NEG_INF;
      window_index[(first << log_p) + t] = j < pc.k ? candidate_index[at] : NONE;
    }
    barrier();
    merge_lists(first + load, log_p);
    next += load;
  }
  for (uint i = tid; i < pc.k; i += wg) {
    out_index[row * pc.k + i] = window_index[i];
    out_value[row * pc.k + i] = window_value[i];
  }
}
