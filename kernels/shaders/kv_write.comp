#version 450
// kv_write: stores one layer's K and V rows of a batch (f32) into f16 KV pages at each token's slot.
// Layout (kernels/ops/kv_layout.h): page p, layer l: K block [P][kv_dim] then V block [P][kv_dim], page
// stride n_layers * 2 * P * kv_dim halves. slots[t] = page * P + slot_in_page, global over the pool; this
// binding covers pages [page_begin, page_begin + page_count) and other tokens are skipped (a pool split
// over several bindings gets one dispatch per chunk); slots[t] < 0 means "do not store". Each invocation
// writes one packed pair of halves (kv_dim is even) so no two invocations share a 32-bit word.
// The ROPE build (kv_write_rope_f16) also rotates K on its way into the pages with normal-mode rope: pairs
// (2i, 2i+1) of each head, exactly the pairs an invocation writes, with rope.comp's arithmetic (rope.glsl).
// The K buffer itself is left unrotated (nothing else reads it). It saves the rope(K) dispatch and its
// barrier.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer K { float k[]; };
layout(set = 0, binding = 1) readonly buffer V { float v[]; };
layout(set = 0, binding = 2) readonly buffer Slots { int slots[]; };
layout(set = 0, binding = 3) buffer Pages { uint pages[]; };
#ifdef ROPE
layout(set = 0, binding = 4) readonly buffer Pos { int positions[]; };
layout(set = 0, binding = 5) readonly buffer Factors { float factors[]; };
#endif
layout(push_constant) uniform Push {
  uint n_tokens;
  uint kv_dim;
  uint k_stride;  // floats between tokens in k
  uint v_stride;
  uint page_tokens;  // P
  uint n_layers;
  uint layer;
  uint page_begin;
  uint page_count;
#ifdef ROPE
  uint head_dim;
  uint rope_dims;  // even, <= head_dim
  uint has_factors;
  float freq_base;
#endif
} pc;
#ifdef ROPE
#include "rope.glsl"
#endif
void main() {
  uint pairs = pc.kv_dim / 2u;
  uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (idx >= pc.n_tokens * pairs) return;
  uint t = idx / pairs;
  uint c = (idx % pairs) * 2u;
  int slot = slots[t];
  if (slot < 0) return;
  uint page = uint(slot) / pc.page_tokens;
  uint in_page = uint(slot) % pc.page_tokens;
  if (page < pc.page_begin || page >= pc.page_begin + pc.page_count) return;
  uint block = pc.page_tokens * pc.kv_dim;  // halves in one K (or V) block
  uint base = (page - pc.page_begin) * pc.n_layers * 2u * block + pc.layer * 2u * block + in_page * pc.kv_dim + c;
  vec2 kk = vec2(k[t * pc.k_stride + c], k[t * pc.k_stride + c + 1u]);
#ifdef ROPE
  uint i = (c % pc.head_dim) / 2u;  // the pair's index inside its head
  if (2u * i < pc.rope_dims)
    kk = rope_rotate(kk, i, pc.rope_dims, pc.freq_base, pc.has_factors != 0u ? factors[i] : 1.0, positions[t]);
#endif
  pages[base / 2u] = packHalf2x16(kk);
  pages[(base + block) / 2u] = packHalf2x16(vec2(v[t * pc.v_stride + c], v[t * pc.v_stride + c + 1u]));
}
