#version 450
// attention_paged: one split of causal GQA attention for one (query token, head). Work group (c, h, t)
// covers key positions [c*chunk, min((c+1)*chunk, pos_t + 1)) of token t's sequence, read as f16 from KV
// pages through the sequence's page table, with an online softmax, and writes the unnormalised partial
// (max m, sum l, acc[head_dim]) for attention_combine.comp. The split size is fixed by the caller (not the
// split count), and keys are visited in fixed blocks of the work-group size, so a token's result does not
// depend on the batch it runs in.
// KV page layout (kernels/ops/kv_layout.h): page p, layer L holds K [page_size][kv_dim] then V
// [page_size][kv_dim], f16, pages of all layers contiguous; kv_dim = n_kv_heads * head_dim.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // >= 32 so that head_dim <= 256 needs at most 8 dims per thread

#define MAX_HEAD_DIM 256u
#define DIMS_PER_THREAD 8u
#define MAX_SUBGROUPS 64u
#define NEG_BIG -3.0e38

layout(set = 0, binding = 0) readonly buffer Q { float q[]; };
// The page pool in up to 4 bindings of pages_per_binding whole pages each (a pool larger than one binding's
// maxStorageBufferRange); 8 f16 per element. Unused bindings repeat the first.
layout(set = 0, binding = 1) readonly buffer KV0 { uvec4 kv0[]; };
layout(set = 0, binding = 2) readonly buffer KV1 { uvec4 kv1[]; };
layout(set = 0, binding = 3) readonly buffer KV2 { uvec4 kv2[]; };
layout(set = 0, binding = 4) readonly buffer KV3 { uvec4 kv3[]; };
layout(set = 0, binding = 5) readonly buffer PageTable { uint page_table[]; };
layout(set = 0, binding = 6) readonly buffer Tokens { uvec2 tokens[]; };  // (page-table offset, position)
layout(set = 0, binding = 7) writeonly buffer Partial { float partial[]; };

layout(push_constant) uniform Push {
  uint n_heads;
  uint n_kv_heads;
  uint head_dim;
  uint page_size;
  uint n_layers;
  uint layer;
  uint chunk;       // key positions per split
  uint max_splits;  // partial slots per (token, head)
  uint q_stride;    // floats between tokens in q
  float scale;
  uint pages_per_binding;
} pc;

shared float qs[MAX_HEAD_DIM];
shared float ps[1024];
shared uint vbase[1024];  // word index of each key's V row in the current block
shared float red[MAX_SUBGROUPS];

float wg_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) red[gl_SubgroupID] = v;
  barrier();
  float r = red[0];
  for (uint i = 1u; i < gl_NumSubgroups; ++i) r = max(r, red[i]);
  barrier();
  return r;
}

float wg_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) red[gl_SubgroupID] = v;
  barrier();
  float r = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; ++i) r += red[i];
  barrier();
  return r;
}

// Location of element 0 of the key (is_v = 0) or value (is_v = 1) row of position j, KV head kh: the
// binding in the top 2 bits, the 32-bit word index inside it below (a binding holds < 2^30 words).
uint kv_word(uint pt_off, uint j, uint kh, uint is_v) {
  uint page = page_table[pt_off + j / pc.page_size];
  uint chunk = page / pc.pages_per_binding;
  page -= chunk * pc.pages_per_binding;
  uint slot = j % pc.page_size;
  uint kv_dim = pc.n_kv_heads * pc.head_dim;
  uint elem = ((page * pc.n_layers + pc.layer) * 2u + is_v) * pc.page_size * kv_dim + slot * kv_dim +
              kh * pc.head_dim;
  return (chunk << 30) | (elem >> 1);
}

uvec4 kv_load4(uint loc) {  // the 16 bytes holding word loc (loc's word index a multiple of 4 when used)
  uint i = (loc & 0x3FFFFFFFu) >> 2;
  switch (loc >> 30) {
    case 0u: return kv0[i];
    case 1u: return kv1[i];
    case 2u: return kv2[i];
    default: return kv3[i];
  }
}
uint kv_load(uint loc) { return kv_load4(loc)[loc & 3u]; }

void main() {
  uint c = gl_WorkGroupID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uvec2 tok = tokens[t];
  uint start = c * pc.chunk;
  if (start > tok.y) return;  // uniform: this token's context has fewer splits
  uint end = min(start + pc.chunk, tok.y + 1u);
  uint kh = h / (pc.n_heads / pc.n_kv_heads);
  uint hd = pc.head_dim;

  for (uint d = tid; d < hd; d += wg) qs[d] = q[t * pc.q_stride + h * hd + d] * pc.scale;
  barrier();

  float m = NEG_BIG, l = 0.0;
  float acc[DIMS_PER_THREAD];
  for (uint i = 0u; i < DIMS_PER_THREAD; ++i) acc[i] = 0.0;

  for (uint j0 = start; j0 < end; j0 += wg) {
    uint j = j0 + tid;
    float s = NEG_BIG;
    if (j < end) {
      uint kw = kv_word(tok.x, j, kh, 0u);
      float dot = 0.0;
      if (hd % 8u == 0u) {  // uniform: 16-byte loads when rows are 16-byte aligned
        for (uint d = 0u; d < hd; d += 8u) {
          uvec4 k8 = kv_load4(kw + d / 2u);
          for (uint c = 0u; c < 4u; ++c) {
            vec2 kk = unpackHalf2x16(k8[c]);
            dot = fma(qs[d + 2u * c], kk.x, dot);
            dot = fma(qs[d + 2u * c + 1u], kk.y, dot);
          }
        }
      } else {
        for (uint d = 0u; d < hd; d += 2u) {
          vec2 kk = unpackHalf2x16(kv_load(kw + d / 2u));
          dot = fma(qs[d], kk.x, dot);
          dot = fma(qs[d + 1u], kk.y, dot);
        }
      }
      s = dot;
    }
    float m_new = max(m, wg_max(s));
    float p = (j < end) ? exp(s - m_new) : 0.0;
    ps[tid] = p;
    // The page-table lookup for each key's V row is done once, by the thread that scored it.
    vbase[tid] = (j < end) ? kv_word(tok.x, j, kh, 1u) : 0u;
    float alpha = exp(m - m_new);
    l = l * alpha + wg_sum(p);  // wg_sum's barrier also publishes ps and vbase
    uint nkeys = min(wg, end - j0);
    for (uint i = 0u; i < DIMS_PER_THREAD; ++i) {
      uint d = tid + i * wg;
      if (d >= hd) break;
      float a = acc[i] * alpha;
      for (uint jj = 0u; jj < nkeys; ++jj) {
        uint vw = vbase[jj] + d / 2u;
        vec2 vv = unpackHalf2x16(kv_load(vw));
        a = fma(ps[jj], (d & 1u) == 0u ? vv.x : vv.y, a);
      }
      acc[i] = a;
    }
    m = m_new;
    barrier();  // ps is rewritten by the next block
  }

  uint base = ((t * pc.n_heads + h) * pc.max_splits + c) * (hd + 2u);
  if (tid == 0u) {
    partial[base] = m;
    partial[base + 1u] = l;
  }
  for (uint i = 0u; i < DIMS_PER_THREAD; ++i) {
    uint d = tid + i * wg;
    if (d >= hd) break;
    partial[base + 2u + d] = acc[i];
  }
}
