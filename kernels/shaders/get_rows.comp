#version 450
// get_rows: out[t][c] = dequant(table row ids[t] - row_begin)[c] for the tokens whose id falls in this
// chunk of the table ([row_begin, row_begin + row_count)); other tokens are left untouched, so a table split
// into chunks (binding size limits) is covered by one dispatch per chunk. One invocation per 8 consecutive
// values of a row, decoded by the block decoders the matrix shaders use (matvec_blocks.glsl).
// NORM_Q: one invocation per 16 values, which it also writes normed and quantized as quantize_q8_norm would
// (the same bits: the same values through the same functions), so the first product needs no quantize pass.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Table { uint wq[]; };
layout(set = 0, binding = 1) readonly buffer Ids { int ids[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_values[]; };
#ifdef NORM_Q
layout(set = 0, binding = 3) readonly buffer N { vec4 norm4[]; };
layout(set = 0, binding = 4) writeonly buffer XQ { uvec4 xq[]; };
layout(set = 0, binding = 5) writeonly buffer XDS { vec2 xds[]; };
layout(set = 0, binding = 6) writeonly buffer SS { float sum_squares[]; };
#define VALUES 16u
#else
#define VALUES 8u
#endif
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n;          // values per row
  uint row_bytes;  // bytes per table row
  uint table_byte_offset;  // where row row_begin starts inside the Table binding
  uint row_begin;
  uint row_count;
  uint out_stride;  // floats between output rows
  uint q_stride;    // NORM_Q: values between tokens in the quantized output (a multiple of 16)
} pc;
#include "matvec_blocks.glsl"
#ifdef NORM_Q
#include "q8_activations.glsl"
#endif
void main() {
  uint groups = (pc.n + VALUES - 1u) / VALUES;
  uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (idx >= pc.n_tokens * groups) return;
  uint t = idx / groups;
  uint g = idx % groups;
  int id = ids[t];
  if (id < int(pc.row_begin) || id >= int(pc.row_begin + pc.row_count)) return;
  uint row_byte = pc.table_byte_offset + uint(id - int(pc.row_begin)) * pc.row_bytes;
#ifdef NORM_Q
  // n is a multiple of 16 (the host checks): both halves are whole.
  float lo[8], hi[8];
  decode8(row_byte, 2u * g, pc.n, lo);
  decode8(row_byte, 2u * g + 1u, pc.n, hi);
  uint o = t * pc.out_stride + 16u * g;
  for (uint i = 0u; i < 8u; ++i) {
    out_values[o + i] = lo[i];
    out_values[o + 8u + i] = hi[i];
  }
  vec4 v0 = vec4(lo[0], lo[1], lo[2], lo[3]), v1 = vec4(lo[4], lo[5], lo[6], lo[7]);
  vec4 v2 = vec4(hi[0], hi[1], hi[2], hi[3]), v3 = vec4(hi[4], hi[5], hi[6], hi[7]);
  uint qg = t * pc.q_stride / 16u + g;
  sum_squares[qg] = sum_squares16(v0, v1, v2, v3);
  XGroup q = quantize16(v0 * norm4[4u * g], v1 * norm4[4u * g + 1u], v2 * norm4[4u * g + 2u], v3 * norm4[4u * g + 3u]);
  xq[qg] = q.q;
  xds[qg] = vec2(q.d, intBitsToFloat(q.s));
#else
  float v[8];
  decode8(row_byte, g, pc.n, v);
  for (uint i = 0u; i < 8u && 8u * g + i < pc.n; ++i) out_values[t * pc.out_stride + 8u * g + i] = v[i];
#endif
}
