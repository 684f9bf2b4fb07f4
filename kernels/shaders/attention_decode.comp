#version 450
// attention_decode: one split of causal GQA attention for one query token and the query heads (up to MAX_G)
// of one KV head, for decode batches. Work group (c, y, t): y = kv head * head_groups + head group. Unlike
// attention.comp there are no shared K/V tiles: each subgroup takes its own passes of LANES keys of the
// split (pass i of subgroup s starts at c * chunk + (s + i * SUBGROUPS) * LANES) and reads K and V straight
// from the pages into registers: lane j scores key j of its pass against every head (q is broadcast from
// shared memory), the subgroup's softmax runs with subgroup reductions, and each lane then accumulates its
// quads of dimensions over the pass's keys. The subgroups' states merge in fixed order at the end and the
// work group writes the unnormalised partial (max m, sum l, acc[head_dim]) for attention_combine.comp,
// in attention.comp's layout. Few barriers, many loads in flight: decode attention is latency-bound.
//
// A token's arithmetic depends only on itself and the split size (one work group a token), but differs from
// attention.comp's: --deterministic runs attention.comp for every batch (attention.h).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;                     // SUBGROUPS * LANES
layout(constant_id = 1) const uint SUBGROUPS = 4u;  // subgroups per work group

// Build defines: HD, head_dim (64 or 128), and LANES, the device's subgroup size (8 to 64). Both are
// compile-time so that every per-lane array below is unrolled into registers (sized by a specialization
// constant, they were not: the kernel ran 6x slower on an H200).
#ifndef MAX_G  // query heads a work group at most (tuning probe builds: 4)
#define MAX_G 8u
#endif
#define NEG_BIG -3.0e38
const uint QUADS = HD / 4u;                      // 4-dimension quads of a head
const uint LPK = LANES < QUADS ? LANES : QUADS;  // lanes that share one key in the PV product
const uint KG = LANES / LPK;                     // keys accumulated side by side (key groups)
const uint LQ = QUADS / LPK;                     // quads a lane accumulates
const uint KPG = LANES / KG;                     // keys per key group in a pass

layout(set = 0, binding = 0) readonly buffer Q { float q[]; };
// Bindings 1..4: the page pool (kv_pool.glsl).
layout(set = 0, binding = 5) readonly buffer PageTable { uint page_table[]; };
layout(set = 0, binding = 6) readonly buffer Tokens { uvec2 tokens[]; };  // (page-table offset, position)
layout(set = 0, binding = 7) writeonly buffer Partial { float partial[]; };

// attention.comp's push constants; block_tokens, tile_keys and row_stride4 are not used here.
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
  uint heads_per_wg;  // query heads of one KV head per WG, at most MAX_G (the last group may have fewer)
  uint block_tokens;
  uint tile_keys;
  uint row_stride4;
} pc;

shared vec4 qs4[MAX_G * QUADS];                     // q * scale of the work group's heads
shared vec4 ps4[SUBGROUPS * LANES * MAX_G / 4u];    // a pass's probabilities: [subgroup][key][head]
shared uint vls[SUBGROUPS * LANES];                 // a pass's V row locations: [subgroup][key]
shared float ms[SUBGROUPS * MAX_G];                 // each subgroup's softmax state per head
shared float ls[SUBGROUPS * MAX_G];
shared vec4 accs[SUBGROUPS * KG * MAX_G * QUADS];   // ... and its accumulators per key group

#include "kv_pool.glsl"

vec4 half4(uvec2 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }

// The f16 quad qi of lane lq's dimensions in the V row at word vl.
uvec2 v_quad(uint vl, uint qi, uint lq) {
  uint w = vl + 2u * (lq + qi * LPK);
  uvec4 raw = kv_load4(w);
  return (w & 2u) != 0u ? raw.zw : raw.xy;
}

void main() {
  uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint c = gl_WorkGroupID.x, t = gl_WorkGroupID.z;
  uint group_heads = pc.n_heads / pc.n_kv_heads;
  uint groups = (group_heads + pc.heads_per_wg - 1u) / pc.heads_per_wg;
  uint kh = gl_WorkGroupID.y / groups, hg = gl_WorkGroupID.y % groups;
  uint hn = min(pc.heads_per_wg, group_heads - hg * pc.heads_per_wg);  // heads in this WG
  uint h0 = kh * group_heads + hg * pc.heads_per_wg;
  uvec2 tk = tokens[t];
  uint pt_off = tk.x, start = c * pc.chunk;
  if (start > tk.y) return;  // uniform: the token does not reach this split
  uint end = min(start + pc.chunk, tk.y + 1u);

  for (uint i = gl_LocalInvocationID.x; i < MAX_G * QUADS; i += gl_WorkGroupSize.x) {
    vec4 v = vec4(0.0);
    if (i < hn * QUADS) {
      uint b = t * pc.q_stride + h0 * HD + 4u * i;  // the WG's heads are contiguous in q
      v = vec4(q[b], q[b + 1u], q[b + 2u], q[b + 3u]) * pc.scale;
    }
    qs4[i] = v;
  }
  barrier();

  uint kg = lane / LPK, lq = lane % LPK;
  float m[MAX_G], l[MAX_G];
  vec4 acc[MAX_G][LQ];
  [[unroll]] for (uint h = 0u; h < MAX_G; ++h) {
    m[h] = NEG_BIG;
    l[h] = 0.0;
    [[unroll]] for (uint qi = 0u; qi < LQ; ++qi) acc[h][qi] = vec4(0.0);
  }

  for (uint ts = start + sg * LANES; ts < end; ts += SUBGROUPS * LANES) {  // uniform in the subgroup
    uint j = ts + lane;
    bool valid = j < end;
    // Lane j locates key j's K and V rows (keys past the end use key ts and get p = 0); the V rows are
    // shared so that each lane loads its quads of every key of its key group, ahead of the scores.
    uint jr = valid ? j : ts;
    uint kl = kv_word(pt_off, jr, kh, 0u);
    vls[sg * LANES + lane] = kv_word(pt_off, jr, kh, 1u);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
#ifndef NO_V_PREFETCH  // (a tuning probe build loads V in the PV loop instead)
    uvec2 vr[KPG][LQ];
    [[unroll]] for (uint jj = 0u; jj < KPG; ++jj) {
      uint vl = vls[sg * LANES + jj * KG + kg];
      [[unroll]] for (uint qi = 0u; qi < LQ; ++qi) vr[jj][qi] = v_quad(vl, qi, lq);
    }
#endif
    // Scores: lane j against key j (K read in 16-byte pieces; q broadcast from shared memory).
    float s[MAX_G];
    [[unroll]] for (uint h = 0u; h < MAX_G; ++h) s[h] = 0.0;
    [[unroll]] for (uint d8 = 0u; d8 < HD / 8u; ++d8) {
      uvec4 w = kv_load4(kl + 4u * d8);
      vec4 ka = half4(w.xy), kb = half4(w.zw);
      [[unroll]] for (uint h = 0u; h < MAX_G; ++h)
        if (h < hn) s[h] += dot(qs4[h * QUADS + 2u * d8], ka) + dot(qs4[h * QUADS + 2u * d8 + 1u], kb);
    }
    // Online softmax per head over the pass's keys.
    float p[MAX_G];
    [[unroll]] for (uint h = 0u; h < MAX_G; ++h) {
      p[h] = 0.0;
      if (h < hn) {
        float sv = valid ? s[h] : NEG_BIG;
        float mn = max(m[h], subgroupMax(sv));
        p[h] = valid ? exp(sv - mn) : 0.0;
        float alpha = exp(m[h] - mn);
        l[h] = l[h] * alpha + subgroupAdd(p[h]);
        m[h] = mn;
        [[unroll]] for (uint qi = 0u; qi < LQ; ++qi) acc[h][qi] *= alpha;
      }
    }
    uint pb = (sg * LANES + lane) * (MAX_G / 4u);
    [[unroll]] for (uint i = 0u; i < MAX_G / 4u; ++i)
      ps4[pb + i] = vec4(p[4u * i], p[4u * i + 1u], p[4u * i + 2u], p[4u * i + 3u]);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // PV: this lane's quads over its key group's keys of the pass.
    [[unroll]] for (uint jj = 0u; jj < KPG; ++jj) {
      uint pk = (sg * LANES + jj * KG + kg) * (MAX_G / 4u);
#ifdef NO_V_PREFETCH
      uint vl = vls[sg * LANES + jj * KG + kg];
#endif
      [[unroll]] for (uint qi = 0u; qi < LQ; ++qi) {
#ifdef NO_V_PREFETCH
        vec4 v = half4(v_quad(vl, qi, lq));
#else
        vec4 v = half4(vr[jj][qi]);
#endif
        [[unroll]] for (uint h = 0u; h < MAX_G; ++h)
          if (h < hn) acc[h][qi] = fma(vec4(ps4[pk + h / 4u][h % 4u]), v, acc[h][qi]);
      }
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // ps4 and vls are rewritten by the next pass
  }

  // Merge the subgroups (and key groups) in fixed order; a subgroup without keys has m = NEG_BIG, l = 0.
  [[unroll]] for (uint h = 0u; h < MAX_G; ++h) {
    if (lane == 0u) {
      ms[sg * MAX_G + h] = m[h];
      ls[sg * MAX_G + h] = l[h];
    }
    [[unroll]] for (uint qi = 0u; qi < LQ; ++qi)
      accs[((sg * KG + kg) * MAX_G + h) * QUADS + lq + qi * LPK] = acc[h][qi];
  }
  barrier();
  uint stride = HD + 2u;
  for (uint i = gl_LocalInvocationID.x; i < hn * QUADS; i += gl_WorkGroupSize.x) {
    uint h = i / QUADS, dq = i % QUADS;
    float mx = NEG_BIG;
    for (uint g = 0u; g < SUBGROUPS; ++g) mx = max(mx, ms[g * MAX_G + h]);
    float sum = 0.0;
    vec4 a = vec4(0.0);
    for (uint g = 0u; g < SUBGROUPS; ++g) {
      float e = exp(ms[g * MAX_G + h] - mx);
      sum += ls[g * MAX_G + h] * e;
      vec4 ga = vec4(0.0);
      for (uint k = 0u; k < KG; ++k) ga += accs[((g * KG + k) * MAX_G + h) * QUADS + dq];
      a += ga * e;
    }
    uint base = ((t * pc.n_heads + h0 + h) * pc.max_splits + c) * stride;
    if (dq == 0u) {
      partial[base] = mx;
      partial[base + 1u] = sum;
    }
    base += 2u + 4u * dq;
    partial[base] = a.x;
    partial[base + 1u] = a.y;
    partial[base + 2u] = a.z;
    partial[base + 3u] = a.w;
  }
}
