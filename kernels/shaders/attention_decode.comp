#version 450
// attention_decode: one split of causal GQA attention for tokens that each read their K/V alone (none
// shared with other tokens of the sequence): the default path's split pass for decode steps (tokens each
// alone in their sequence), and --deterministic's for every batch. Work group (c, y, t): token t,
// y = kv head * head_groups + head group (its rows are up to 4 query heads of that KV head), split c
// covering key positions [c * chunk, min((c + 1) * chunk, pos + 1)): chunk is the push constant's, or with
// chunk 0 the token's own, position_split(pos), so that nothing but the token itself decides its arithmetic
// (batch-invariant). Nothing is staged but q: each of the work group's subgroups walks its own blocks of
// subgroup-size keys (block b goes to subgroup b % subgroups) with an online softmax of its own; lane j
// scores key j of the block against every row (its K row read whole, 16 bytes at a time), the block's max
// and sum are subgroup reductions, and for P V each lane owns dimension quads (4 dims) of every row and
// reads each key's probabilities (a vec4: one per row) and V location from the subgroup's slots in shared
// memory (shuffles per key and row cost several times more). One work-group barrier after q and one at the
// end, where the subgroups' (m, l, acc) merge: when the token's context is one split (out_mode != 0), into
// the normalised output itself: f32 (1), f16 pairs (2), or f32 plus the o product's quantized input (3, as
// quantize_q8.comp would write it); else into the unnormalised partial of attention.comp's layout, which
// attention_combine.comp merges, or (fused) the last of the token's splits to finish, counted in
// split_count. Another summation order than attention.comp: the two are not batch-invariant against each
// other. head_dim a multiple of 8. Builds: HD and SGC (the subgroup size they assume, checked on the host)
// fixed, or neither (any head_dim / subgroup size the host allows).
// KEY_LANES (a specialization constant, 1 unless a pipeline asks for 2 or 4): lanes that score a key
// together, each head_dim / KEY_LANES of it, so a subgroup's block is subgroup-size / KEY_LANES keys: lane
// j scores part j / keys of key j % keys, and the parts' sums meet in shared memory in part order (every lane
// of a key gets the same bits). Shorter score chains and more subgroups busy in a short split, for more
// blocks a subgroup in a long one. The engine takes 2 for splits shorter than the work group
// (attention_decode_key_lanes); AttentionArgs::decode_key_lanes, kvtrie-bench decode --attention-key-lanes and
// sweep-attention --variants decode_kl2 ... choose otherwise.
// PROBE (tuning builds only, bench/: sweep-attention --variants decode_probe*): 1 leaves out P V and the V
// loads, 2 the K loads (K is constant), 5 the whole key loop (q in, merge, out).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;  // PARTS subgroups (attention.cpp)
layout(constant_id = 1) const uint KEY_LANES = 1u;  // 1, 2 or 4; head_dim a multiple of 8 x KEY_LANES

#define MAXG 4u  // rows (query heads) a work group: a key's probabilities are one vec4
#define ROW_FLOATS 512u  // rows x head_dim, at most
#ifndef PARTS
#define PARTS 8u  // subgroups a work group, at most
#endif
#define SG_MAX 32u       // lanes a subgroup, at most (the host checks)
#define NEG_BIG -3.0e38
#define MERGE_ROUND 8u  // splits whose partials the merging work group loads at once (8 at a 4096 context)
#ifdef HD
#define HEAD_DIM HD
#define QUADS ((HD / 4u + SGC - 1u) / SGC)  // dimension quads a lane
#define KPIECES (HD / 8u)                    // 16-byte pieces of a K row
#ifndef VK
#define VK 16u  // keys a round of V loads (divides SGC)
#endif
#define UNROLL [[unroll]]
#else
#define HEAD_DIM pc.head_dim
#define QUADS 8u     // head_dim / 4 <= 8 x the subgroup size (the host checks)
#define KPIECES 32u  // head_dim <= 256
#define VK 4u        // subgroups of at least 4 lanes (the host checks)
#define UNROLL [[dont_unroll]]  // arrays in memory: a small shader, quick to build (lavapipe)
#endif

layout(set = 0, binding = 0) readonly buffer Q { float q[]; };
// Bindings 1..4: the page pool (kv_pool.glsl), also read 8 bytes at a time here.
layout(set = 0, binding = 1) readonly buffer KV0Q { uvec2 kv0q[]; };
layout(set = 0, binding = 2) readonly buffer KV1Q { uvec2 kv1q[]; };
layout(set = 0, binding = 3) readonly buffer KV2Q { uvec2 kv2q[]; };
layout(set = 0, binding = 4) readonly buffer KV3Q { uvec2 kv3q[]; };
layout(set = 0, binding = 5) readonly buffer PageTable { uint page_table[]; };
layout(set = 0, binding = 6) readonly buffer Tokens { uvec2 tokens[]; };  // (page-table offset, position)
layout(set = 0, binding = 7) coherent buffer Partial { float partial[]; };  // read back when fused
layout(set = 0, binding = 8) writeonly buffer Out { uint out_words[]; };  // f32 values or f16 pairs
layout(set = 0, binding = 9) writeonly buffer OQ { uvec4 out_q[]; };     // out_mode 3: the quantized copy
layout(set = 0, binding = 10) writeonly buffer ODS { vec2 out_ds[]; };
// fused: per (token, work-group row y) the splits that have finished, 0 between dispatches.
layout(set = 0, binding = 11) coherent buffer SplitCount { uint split_count[]; };

layout(push_constant) uniform Push {  // attention.comp's first fifteen (tile_keys, row_stride4 unused)
  uint n_heads;
  uint n_kv_heads;
  uint head_dim;
  uint page_size;
  uint n_layers;
  uint layer;
  uint chunk;  // 0: each token's own, position_split(its position)
  uint max_splits;
  uint q_stride;
  float scale;
  uint pages_per_binding;
  uint heads_per_wg;  // <= MAXG, heads_per_wg * head_dim <= ROW_FLOATS
  uint block_tokens;
  uint tile_keys;
  uint row_stride4;
  uint out_stride;    // values between tokens in out
  uint out_mode;      // 0: partials; the output: 1 f32, 2 f16, 3 f32 and quantized
  uint q_out_stride;  // out_mode 3: values between tokens in the quantized output
  uint fused;         // 1: several splits, merged by the last of them to finish (split_count), out_mode != 0
} pc;

#include "kv_pool.glsl"
#include "q8_activations.glsl"

// The split size of a token at position p under chunk 0 (kernels::attention_position_split): an 8th of its
// positions as a power of two, 128 to 512, the split the host's rule gives a decode step of one sequence.
uint position_split(uint p) {
  return clamp(1u << findMSB(max(p / 8u, 1u)), 128u, 512u);
}

shared vec4 qs4[MAXG * 64u];  // q * scale, [row][d] (rows of head_dim <= 256); at the end the output (mode 3)
shared vec2 part_ml[PARTS * MAXG];  // each subgroup's (m, l) per row
shared vec4 part_acc[PARTS * ROW_FLOATS / 4u];
// each subgroup's block: the probabilities of key j for rows 0..3 (KEY_LANES > 1: first each lane's part
// of its key's scores)
shared vec4 key_p[PARTS * SG_MAX];
shared uint key_loc[PARTS * SG_MAX];  // ... and the location of its V row
shared bool last_split;

// The 8 bytes at word loc (binding in the top 2 bits, as kv_word gives; an even word index).
uvec2 kv_load2(uint loc) {
  uint i = (loc & 0x3FFFFFFFu) >> 1;
  switch (loc >> 30) {
    case 0u: return kv0q[i];
    case 1u: return kv1q[i];
    case 2u: return kv2q[i];
    default: return kv3q[i];
  }
}

vec4 unpack4(uvec2 w) {
  return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}

// The loads below go out together only where their buffer is known: a switch over the bindings around
// each load (kv_load4) keeps them one round trip apart. So each case loads a whole K row, or a round of V.
// This lane's K row (kloc; a row never leaves its page, so its binding) into kw.
#define LOAD_K(BUF)                                            \
  UNROLL for (uint d8 = 0u; d8 < KPIECES; ++d8) {          \
    if (d8 < pieces) kw[d8] = BUF[ki + piece0 + d8];           \
  }
// The uvec2 (dimension quad qd) of the V row at location vl, from a known binding or through kv_load2.
#define V_AT0(vl, qd) kv0q[(((vl)&0x3FFFFFFFu) >> 1) + (qd)]
#define V_AT1(vl, qd) kv1q[(((vl)&0x3FFFFFFFu) >> 1) + (qd)]
#define V_AT2(vl, qd) kv2q[(((vl)&0x3FFFFFFFu) >> 1) + (qd)]
#define V_AT3(vl, qd) kv3q[(((vl)&0x3FFFFFFFu) >> 1) + (qd)]
#define V_AT_ANY(vl, qd) kv_load2((vl) + 2u * (qd))
// Dimension quads of this lane for V rows of keys j0 .. j0 + VK - 1 of the block (locations from the slots).
#define LOAD_V(AT)                                                           \
  UNROLL for (uint u = 0u; u < VK; ++u) {                                \
    uint vl = key_loc[slot0 + j0_ + u];                                      \
    UNROLL for (uint i = 0u; i < QUADS; ++i) {                           \
      uint qd = lane + i * sgs;                                              \
      v[u][i] = qd < d4 ? unpack4(AT(vl, qd)) : vec4(0.0);                \
    }                                                                        \
  }
#define LOAD_V_ROUND(J0)                   \
  {                                        \
    uint j0_ = (J0);                       \
    if (one_binding) {                     \
      switch (vb) {                        \
        case 0u: LOAD_V(V_AT0) break;      \
        case 1u: LOAD_V(V_AT1) break;      \
        case 2u: LOAD_V(V_AT2) break;      \
        default: LOAD_V(V_AT3) break;      \
      }                                    \
    } else {                               \
      LOAD_V(V_AT_ANY)                     \
    }                                      \
  }

// Output quad i (row i / (head_dim / 4)) of the work group at value index at: f32, f16 pairs, or f32 with
// the quad kept in qs4 for the quantized copy (every subgroup is past its last read of q by then).
void write_out(uint i, uint at, vec4 v) {
  if (pc.out_mode == 2u) {
    out_words[at / 2u] = packFloat2x16(f16vec2(v.xy));  // rounded as convert.comp rounds
    out_words[at / 2u + 1u] = packFloat2x16(f16vec2(v.zw));
    return;
  }
  UNROLL for (uint e = 0u; e < 4u; ++e) out_words[at + e] = floatBitsToUint(v[e]);
  if (pc.out_mode == 3u) qs4[i] = v;
}

void main() {
  uint c = gl_WorkGroupID.x, t = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize, nsg = gl_NumSubgroups;
  uint group_heads = pc.n_heads / pc.n_kv_heads;
  uint groups = (group_heads + pc.heads_per_wg - 1u) / pc.heads_per_wg;
  uint kh = gl_WorkGroupID.y / groups, hg = gl_WorkGroupID.y % groups;
  uint hn = min(pc.heads_per_wg, group_heads - hg * pc.heads_per_wg);  // rows of this work group
  uint h0 = kh * group_heads + hg * pc.heads_per_wg;
  uint hd = HEAD_DIM, d4 = hd / 4u;

  uvec2 tk = tokens[t];
  uint chunk = pc.chunk != 0u ? pc.chunk : position_split(tk.y);
  uint pt_off = tk.x, start = c * chunk;
  if (start > tk.y) return;  // uniform: the token's context ends before this split
  uint end = min(start + chunk, tk.y + 1u);

  for (uint i = tid; i < MAXG * d4; i += wg) {  // rows past hn are 0: their scores are 0, never written
    uint b = t * pc.q_stride + h0 * hd + 4u * i;
    qs4[i] = i < hn * d4 ? vec4(q[b], q[b + 1u], q[b + 2u], q[b + 3u]) * pc.scale : vec4(0.0);
  }
  barrier();

  float m[MAXG], l[MAXG];
  vec4 acc[MAXG][QUADS];
  UNROLL for (uint r = 0u; r < MAXG; ++r) {
    m[r] = NEG_BIG;
    l[r] = 0.0;
    UNROLL for (uint i = 0u; i < QUADS; ++i) acc[r][i] = vec4(0.0);
  }

#if defined(PROBE) && PROBE == 5
  end = start;
#endif
  uint slot0 = sg * SG_MAX;  // this subgroup's key slots
  // A block of bk keys: lane j scores K pieces piece0.. (16 bytes each) of key kj = j % bk (with one lane a
  // key, written so that the specialization folds it away).
  uint bk = sgs / KEY_LANES, kj = KEY_LANES == 1u ? lane : lane % bk, part = KEY_LANES == 1u ? 0u : lane / bk;
  uint pieces = hd / 8u / KEY_LANES, piece0 = part * pieces;
  for (uint kb = start + sg * bk; kb < end; kb += nsg * bk) {
    uint key = kb + kj;
    bool valid = key < end;
    // A lane past the end reads the block's first key: finite values, weighed by p = 0.
    uint kloc = kv_word(pt_off, valid ? key : kb, kh, 0u);
    uint vloc = kv_word(pt_off, valid ? key : kb, kh, 1u);
    uvec4 kw[KPIECES];
    uint ki = (kloc & 0x3FFFFFFFu) >> 2;
#if defined(PROBE) && PROBE == 2
    UNROLL for (uint d8 = 0u; d8 < KPIECES; ++d8) kw[d8] = uvec4(0x3C003C00u + (ki & 1u));
#else
    switch (kloc >> 30) {
      case 0u: LOAD_K(kv0) break;
      case 1u: LOAD_K(kv1) break;
      case 2u: LOAD_K(kv2) break;
      default: LOAD_K(kv3) break;
    }
#endif
    uint vb = vloc >> 30;
    bool one_binding = subgroupAllEqual(vb);
    key_loc[slot0 + lane] = vloc;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    vec4 v[VK][QUADS];
#if !defined(PROBE) || PROBE != 1
    LOAD_V_ROUND(0u)
#endif

    vec4 s = vec4(0.0);  // this lane's key against rows 0..3 (rows past hn: q is 0)
    UNROLL for (uint d8 = 0u; d8 < KPIECES; ++d8) {
      if (d8 < pieces) {
        vec4 k0 = vec4(unpackHalf2x16(kw[d8].x), unpackHalf2x16(kw[d8].y));
        vec4 k1 = vec4(unpackHalf2x16(kw[d8].z), unpackHalf2x16(kw[d8].w));
        uint qi = 2u * (piece0 + d8);
        UNROLL for (uint r = 0u; r < MAXG; ++r) s[r] += dot(qs4[r * d4 + qi], k0) + dot(qs4[r * d4 + qi + 1u], k1);
      }
    }
    if (KEY_LANES > 1u) {  // the parts' sums in part order, the same bits on every lane of the key
      key_p[slot0 + lane] = s;
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      s = key_p[slot0 + kj];
      UNROLL for (uint q = 1u; q < KEY_LANES; ++q) s += key_p[slot0 + kj + q * bk];
      subgroupBarrier();  // every lane has read the parts before the probabilities overwrite them
    }
    vec4 p;
    UNROLL for (uint r = 0u; r < MAXG; ++r) {
      float m_new = max(m[r], subgroupMax(valid ? s[r] : NEG_BIG));
      p[r] = valid ? exp(s[r] - m_new) : 0.0;
      float alpha = exp(m[r] - m_new);
      l[r] = l[r] * alpha + subgroupAdd(part == 0u ? p[r] : 0.0);
      m[r] = m_new;
      UNROLL for (uint i = 0u; i < QUADS; ++i) acc[r][i] *= alpha;
    }
    // Slots bk.. (KEY_LANES > 1) weigh nothing: a round of VK keys may reach them.
    key_p[slot0 + lane] = part == 0u ? p : vec4(0.0);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // P V, VK keys a round; the next round's loads go out first.
    uint nk = min(bk, end - kb);
#if defined(PROBE) && PROBE == 1
    nk = 0u;
#endif
    for (uint j0 = 0u; j0 < nk; j0 += VK) {
      vec4 cur[VK][QUADS] = v;
      if (j0 + VK < nk) LOAD_V_ROUND(j0 + VK)
      UNROLL for (uint u = 0u; u < VK; ++u) {
        vec4 pj = key_p[slot0 + j0 + u];
        UNROLL for (uint r = 0u; r < MAXG; ++r)
          UNROLL for (uint i = 0u; i < QUADS; ++i) acc[r][i] = fma(vec4(pj[r]), cur[u][i], acc[r][i]);
      }
    }
    subgroupBarrier();  // every lane has read the slots before the next block rewrites them
  }

  // Merge the subgroups: a subgroup without keys has m = NEG_BIG, l = 0 and acc = 0, which weigh nothing.
  UNROLL for (uint r = 0u; r < MAXG; ++r) {
    if (r < hn) {
      if (lane == 0u) part_ml[sg * MAXG + r] = vec2(m[r], l[r]);
      UNROLL for (uint i = 0u; i < QUADS; ++i) {
        uint qd = lane + i * sgs;
        if (qd < d4) part_acc[sg * (ROW_FLOATS / 4u) + r * d4 + qd] = acc[r][i];
      }
    }
  }
  barrier();
  // One split of the token's context (the whole of it here, or the token's only split): the output itself.
  uint token_splits = tk.y / chunk + 1u;
  bool direct = pc.out_mode != 0u && (pc.max_splits == 1u || (pc.fused != 0u && token_splits == 1u));
  for (uint i = tid; i < hn * d4; i += wg) {
    uint r = i / d4, qd = i % d4;
    float mx = NEG_BIG;
    for (uint k = 0u; k < nsg; ++k) mx = max(mx, part_ml[k * MAXG + r].x);
    float sum = 0.0;
    vec4 a = vec4(0.0);
    for (uint k = 0u; k < nsg; ++k) {
      vec2 ml = part_ml[k * MAXG + r];
      float w = exp(ml.x - mx);
      sum += ml.y * w;
      a += part_acc[k * (ROW_FLOATS / 4u) + i] * w;
    }
    if (direct) {
      write_out(i, t * pc.out_stride + (h0 + r) * hd + 4u * qd, a / sum);
      continue;
    }
    uint base = ((t * pc.n_heads + h0 + r) * pc.max_splits + c) * (hd + 2u);
    if (qd == 0u) {
      partial[base] = mx;
      partial[base + 1u] = sum;
    }
    UNROLL for (uint e = 0u; e < 4u; ++e) partial[base + 2u + 4u * qd + e] = a[e];
  }
  if (!direct) {
    if (pc.fused == 0u) return;  // attention_combine merges the splits
    // The last of the token's splits to finish merges them all, in split order, and resets the counter for
    // the next dispatch (each split's partials are made visible before it counts).
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) {
      uint slot = t * gl_NumWorkGroups.y + gl_WorkGroupID.y;
      last_split = atomicAdd(split_count[slot], 1u) == token_splits - 1u;
      if (last_split) split_count[slot] = 0u;
    }
    barrier();
    if (!last_split) return;
    memoryBarrierBuffer();
    for (uint i = tid; i < hn * d4; i += wg) {
      uint r = i / d4, qd = i % d4;
      uint base = (t * pc.n_heads + h0 + r) * pc.max_splits * (hd + 2u);
      // MERGE_ROUND splits at a time, their loads issued together (one round trip each instead of one a
      // split), summed in split order with the splits past the last skipped: one at a time's sums, in its order.
      float mx = NEG_BIG;
      for (uint k0 = 0u; k0 < token_splits; k0 += MERGE_ROUND) {
        float m[MERGE_ROUND];
        UNROLL for (uint j = 0u; j < MERGE_ROUND; ++j)
          m[j] = partial[base + min(k0 + j, token_splits - 1u) * (hd + 2u)];
        UNROLL for (uint j = 0u; j < MERGE_ROUND; ++j) mx = max(mx, m[j]);  // a repeated split changes no max
      }
      float sum = 0.0;
      vec4 a = vec4(0.0);
      for (uint k0 = 0u; k0 < token_splits; k0 += MERGE_ROUND) {
        vec2 ml[MERGE_ROUND];
        vec4 acc4[MERGE_ROUND];
        UNROLL for (uint j = 0u; j < MERGE_ROUND; ++j) {
          uint b = base + min(k0 + j, token_splits - 1u) * (hd + 2u);
          ml[j] = vec2(partial[b], partial[b + 1u]);
          acc4[j] = vec4(partial[b + 2u + 4u * qd], partial[b + 3u + 4u * qd], partial[b + 4u + 4u * qd],
                         partial[b + 5u + 4u * qd]);
        }
        UNROLL for (uint j = 0u; j < MERGE_ROUND; ++j) {
          // A select, not a branch: a load used only inside a branch may be moved into it, one round trip
          // after another.
          float w = exp(ml[j].x - mx);
          float sum_j = sum + ml[j].y * w;
          vec4 a_j = a + acc4[j] * w;
          bool in_token = k0 + j < token_splits;
          sum = in_token ? sum_j : sum;
          a = in_token ? a_j : a;
        }
      }
      write_out(i, t * pc.out_stride + (h0 + r) * hd + 4u * qd, a / sum);
    }
  }
  if (pc.out_mode != 3u) return;
  barrier();
  for (uint g = tid; g < hn * hd / 16u; g += wg) {
    XGroup x = quantize16(qs4[4u * g], qs4[4u * g + 1u], qs4[4u * g + 2u], qs4[4u * g + 3u]);
    uint oi = t * pc.q_out_stride / 16u + h0 * hd / 16u + g;
    out_q[oi] = x.q;
    out_ds[oi] = vec2(x.d, intBitsToFloat(x.s));
  }
}
