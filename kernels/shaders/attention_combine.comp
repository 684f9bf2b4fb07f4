#version 450
// attention_combine: merges the splits written by attention.comp for one (head, token) in increasing split
// order (a fixed order, so results are deterministic for a fixed split size) and writes the normalised
// output out[t][h * head_dim + d]. QUANT_OUT: the output is also written quantized for the o projection
// (matvec_q8), every 16 values as quantize_q8.comp would quantize them (q8_activations.glsl). HALF_OUT: the
// output is written as f16 instead, two values a word (out_stride and head_dim even), rounded as
// convert.comp rounds the f32 values: the f16 x of a tensor-core o product without a conversion pass.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Partial { float partial[]; };
layout(set = 0, binding = 1) readonly buffer Tokens { uvec2 tokens[]; };  // (page-table offset, position)
#ifdef HALF_OUT
layout(set = 0, binding = 2) writeonly buffer Out { uint o_pairs[]; };
#else
layout(set = 0, binding = 2) writeonly buffer Out { float o[]; };
#endif
#ifdef QUANT_OUT
layout(set = 0, binding = 3) writeonly buffer OQ { uvec4 out_q[]; };  // token t's group g at t * q_stride / 16 + g
layout(set = 0, binding = 4) writeonly buffer ODS { vec2 out_ds[]; };
#endif

layout(push_constant) uniform Push {
  uint n_heads;
  uint head_dim;    // QUANT_OUT: a multiple of 16, at most 256
  uint chunk;
  uint max_splits;
  uint out_stride;  // floats between tokens in out
  uint q_stride;    // QUANT_OUT: values between tokens in the quantized output
} pc;

#ifdef QUANT_OUT
#include "q8_activations.glsl"
#endif
#if defined(QUANT_OUT) || defined(HALF_OUT)
shared float head_out[256];
#endif

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  uint hd = pc.head_dim;
  uint splits = tokens[t].y / pc.chunk + 1u;
  uint base = (t * pc.n_heads + h) * pc.max_splits * (hd + 2u);
  uint stride = hd + 2u;
  // Four splits at a time, their loads issued together (one round trip for four instead of four), then
  // summed in split order: the same arithmetic as one at a time.
  float mx = partial[base];
  uint c = 1u;
  for (; c + 4u <= splits; c += 4u) {
    uint b = base + c * stride;
    vec4 m = vec4(partial[b], partial[b + stride], partial[b + 2u * stride], partial[b + 3u * stride]);
    mx = max(max(max(max(mx, m.x), m.y), m.z), m.w);
  }
  for (; c < splits; ++c) mx = max(mx, partial[base + c * stride]);
  float l = 0.0;
  c = 0u;
  for (; c + 4u <= splits; c += 4u) {
    uint b = base + c * stride;
    vec4 m = vec4(partial[b], partial[b + stride], partial[b + 2u * stride], partial[b + 3u * stride]);
    vec4 s = vec4(partial[b + 1u], partial[b + stride + 1u], partial[b + 2u * stride + 1u],
                  partial[b + 3u * stride + 1u]);
    l += s.x * exp(m.x - mx);
    l += s.y * exp(m.y - mx);
    l += s.z * exp(m.z - mx);
    l += s.w * exp(m.w - mx);
  }
  for (; c < splits; ++c) {
    uint b = base + c * stride;
    l += partial[b + 1u] * exp(partial[b] - mx);
  }
  for (uint d = gl_LocalInvocationID.x; d < hd; d += gl_WorkGroupSize.x) {
    float a = 0.0;
    c = 0u;
    for (; c + 4u <= splits; c += 4u) {
      uint b = base + c * stride;
      vec4 m = vec4(partial[b], partial[b + stride], partial[b + 2u * stride], partial[b + 3u * stride]);
      vec4 x = vec4(partial[b + 2u + d], partial[b + stride + 2u + d], partial[b + 2u * stride + 2u + d],
                    partial[b + 3u * stride + 2u + d]);
      a += x.x * exp(m.x - mx);
      a += x.y * exp(m.y - mx);
      a += x.z * exp(m.z - mx);
      a += x.w * exp(m.w - mx);
    }
    for (; c < splits; ++c) {
      uint b = base + c * stride;
      a += partial[b + 2u + d] * exp(partial[b] - mx);
    }
    float v = a / l;
#ifndef HALF_OUT
    o[t * pc.out_stride + h * hd + d] = v;
#endif
#if defined(QUANT_OUT) || defined(HALF_OUT)
    head_out[d] = v;
#endif
  }
#ifdef HALF_OUT
  barrier();
  uint o_base = (t * pc.out_stride + h * hd) / 2u;
  for (uint p = gl_LocalInvocationID.x; p < hd / 2u; p += gl_WorkGroupSize.x)
    o_pairs[o_base + p] = packFloat2x16(f16vec2(head_out[2u * p], head_out[2u * p + 1u]));
#endif
#ifdef QUANT_OUT
  barrier();
  for (uint g = gl_LocalInvocationID.x; g < hd / 16u; g += gl_WorkGroupSize.x) {
    vec4 v[4];
    [[unroll]] for (uint i = 0u; i < 4u; ++i)
      v[i] = vec4(head_out[16u * g + 4u * i], head_out[16u * g + 4u * i + 1u], head_out[16u * g + 4u * i + 2u],
                  head_out[16u * g + 4u * i + 3u]);
    XGroup q = quantize16(v[0], v[1], v[2], v[3]);
    uint oi = t * pc.q_stride / 16u + h * hd / 16u + g;
    out_q[oi] = q.q;
    out_ds[oi] = vec2(q.d, intBitsToFloat(q.s));
  }
#endif
}
