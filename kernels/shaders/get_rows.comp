#version 450
// get_rows: out[t][c] = dequant(table row ids[t] - row_begin)[c] for the tokens whose id falls in this
// chunk of the table ([row_begin, row_begin + row_count)); other tokens are left untouched, so a table split
// into chunks (binding size limits) is covered by one dispatch per chunk. One invocation per 8 consecutive
// values of a row, decoded by the block decoders the matrix shaders use (matvec_blocks.glsl).
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer Table { uint wq[]; };
layout(set = 0, binding = 1) readonly buffer Ids { int ids[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_values[]; };
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n;          // values per row
  uint row_bytes;  // bytes per table row
  uint table_byte_offset;  // where row row_begin starts inside the Table binding
  uint row_begin;
  uint row_count;
  uint out_stride;  // floats between output rows
} pc;
#include "matvec_blocks.glsl"
void main() {
  uint groups = (pc.n + 7u) / 8u;
  uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (idx >= pc.n_tokens * groups) return;
  uint t = idx / groups;
  uint g = idx % groups;
  int id = ids[t];
  if (id < int(pc.row_begin) || id >= int(pc.row_begin + pc.row_count)) return;
  uint row_byte = pc.table_byte_offset + uint(id - int(pc.row_begin)) * pc.row_bytes;
  float v[8];
  decode8(row_byte, g, pc.n, v);
  for (uint i = 0u; i < 8u && 8u * g + i < pc.n; ++i) out_values[t * pc.out_stride + 8u * g + i] = v[i];
}
