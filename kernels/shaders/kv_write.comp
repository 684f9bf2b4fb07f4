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
// barrier. The QKV build (kv_write_rope_qkv_f16) reads K and V from one buffer that also holds Q (the fused
// product's rows, bound once: one dispatch must not bind a buffer twice when it writes it) and rotates Q
// in place too: invocations past a token's K/V pairs take its Q pairs. That saves the rope(Q) dispatch
// and a barrier level of the decode step.
layout(local_size_x_id = 0) in;
#ifdef QKV
layout(set = 0, binding = 0) buffer QKVRows { float qkv[]; };
#define K_AT(i) qkv[pc.k_offset + (i)]
#define V_AT(i) qkv[pc.v_offset + (i)]
#define B_SLOTS 1
#define B_PAGES 2
#define B_POS 3
#define B_FACTORS 4
#else
layout(set = 0, binding = 0) readonly buffer K { float k[]; };
layout(set = 0, binding = 1) readonly buffer V { float v[]; };
#define K_AT(i) k[i]
#define V_AT(i) v[i]
#define B_SLOTS 2
#define B_PAGES 3
#define B_POS 4
#define B_FACTORS 5
#endif
layout(set = 0, binding = B_SLOTS) readonly buffer Slots { int slots[]; };
layout(set = 0, binding = B_PAGES) buffer Pages { uint pages[]; };
#ifdef ROPE
layout(set = 0, binding = B_POS) readonly buffer Pos { int positions[]; };
layout(set = 0, binding = B_FACTORS) readonly buffer Factors { float factors[]; };
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
#ifdef QKV
  uint k_offset;  // floats from the binding's start to token 0's K, V and Q
  uint v_offset;
  uint q_offset;
  uint q_stride;  // floats between tokens' Q
  uint q_pairs;   // Q pairs per token
#endif
} pc;
#include "kv_layout.glsl"
#ifdef ROPE
#include "rope.glsl"
#endif
void main() {
  uint pairs = pc.kv_dim / 2u;
#ifdef QKV
  uint per_token = pairs + pc.q_pairs;
#else
  uint per_token = pairs;
#endif
  uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (idx >= pc.n_tokens * per_token) return;
  uint t = idx / per_token;
  uint e = idx % per_token;
#ifdef QKV
  if (e >= pairs) {  // a pair of Q, rotated in place
    uint qc = (e - pairs) * 2u, qi = (qc % pc.head_dim) / 2u, o = pc.q_offset + t * pc.q_stride + qc;
    if (2u * qi < pc.rope_dims) {
      vec2 r = rope_rotate(vec2(qkv[o], qkv[o + 1u]), qi, pc.rope_dims, pc.freq_base,
                           pc.has_factors != 0u ? factors[qi] : 1.0, positions[t]);
      qkv[o] = r.x;
      qkv[o + 1u] = r.y;
    }
    return;
  }
#endif
  uint c = e * 2u;
  int slot = slots[t];
  if (slot < 0) return;
  uint page = uint(slot) / pc.page_tokens;
  uint in_page = uint(slot) % pc.page_tokens;
  if (page < pc.page_begin || page >= pc.page_begin + pc.page_count) return;
  uint k_at = kv_element(page - pc.page_begin, pc.layer, 0u, in_page, c, pc.n_layers, pc.page_tokens, pc.kv_dim);
  uint v_at = kv_element(page - pc.page_begin, pc.layer, 1u, in_page, c, pc.n_layers, pc.page_tokens, pc.kv_dim);
  vec2 kk = vec2(K_AT(t * pc.k_stride + c), K_AT(t * pc.k_stride + c + 1u));
#ifdef ROPE
  uint i = (c % pc.head_dim) / 2u;  // the pair's index inside its head
  if (2u * i < pc.rope_dims)
    kk = rope_rotate(kk, i, pc.rope_dims, pc.freq_base, pc.has_factors != 0u ? factors[i] : 1.0, positions[t]);
#endif
  pages[k_at / 2u] = packHalf2x16(kk);
  pages[v_at / 2u] = packHalf2x16(vec2(V_AT(t * pc.v_stride + c), V_AT(t * pc.v_stride + c + 1u)));
}
