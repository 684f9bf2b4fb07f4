#version 450
// tile_decode_<type>: writes every 16-value piece of every row as matmul_coopmat.comp's fast loader
// decodes it (tile_decode.glsl), as f32, so tests can check that loader against the CPU decoder on any
// device, cooperative matrices or not. Invocation i takes piece i % pieces of row i / pieces.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer W { uvec4 w4[]; };
layout(set = 0, binding = 1) writeonly buffer Out { float values[]; };
layout(push_constant) uniform Push {
  uint rows;
  uint k;          // values per row
  uint row_words;  // uvec4 words per row
} pc;
#include "tile_decode.glsl"
void main() {
  uint i = gl_GlobalInvocationID.x, pieces = pc.k / 16u;
  if (i >= pc.rows * pieces) return;
  f16vec2 v[8];
  decode16((i / pieces) * pc.row_words, i % pieces, v);
  for (uint j = 0u; j < 8u; ++j) {
    values[16u * i + 2u * j] = float(v[j].x);
    values[16u * i + 2u * j + 1u] = float(v[j].y);
  }
}
