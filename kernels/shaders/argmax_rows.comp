#version 450
// argmax_rows: the index of the largest of each row's n floats, one work group a row, NaN read as -inf and
// ties (and a row of nothing but -inf and NaN) going to the lowest index: what Sampler's greedy picks from
// the same row. Each thread keeps the first strictly larger of its values (UNROLL loads in flight a pass),
// then a fixed tree over shared memory prefers the larger value, then the lower index.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#define UNROLL 8u
#define NONE 0xFFFFFFFFu
layout(set = 0, binding = 0) readonly buffer Logits { float logits[]; };
layout(set = 0, binding = 1) writeonly buffer Out { uint out_index[]; };
layout(push_constant) uniform Push { uint n; } pc;

shared float best_value[256];
shared uint best_index[256];

void main() {
  uint row = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint base = row * pc.n;
  float value = uintBitsToFloat(0xFF800000u);  // -inf: NaN and -inf never replace it
  uint index = NONE;
  for (uint i0 = tid; i0 < pc.n; i0 += UNROLL * wg) {
    float v[UNROLL];
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
      uint i = i0 + u * wg;
      v[u] = i < pc.n ? logits[base + i] : uintBitsToFloat(0xFF800000u);
    }
    [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
      if (v[u] > value) {  // increasing indices: the first of equal values stays
        value = v[u];
        index = i0 + u * wg;
      }
    }
  }
  best_value[tid] = value;
  best_index[tid] = index;
  barrier();
  for (uint s = wg / 2u; s > 0u; s >>= 1) {
    if (tid < s) {
      float v = best_value[tid + s];
      uint i = best_index[tid + s];
      if (v > best_value[tid] || (v == best_value[tid] && i < best_index[tid])) {
        best_value[tid] = v;
        best_index[tid] = i;
      }
    }
    barrier();
  }
  if (tid == 0u) out_index[row] = best_index[0] == NONE ? 0u : best_index[0];
}
