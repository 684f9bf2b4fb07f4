#version 450
// attention_paged: one split of causal GQA attention for a run of query tokens and the query heads that
// share one KV head. Work group (c, y, t0): y = kv head * head_groups + head group; t0 leads a run, the
// tokens t0.. of its aligned block of block_tokens tokens that share t0's page-table offset (one sequence;
// a block holding several sequences is cut into runs at each change, and a WG whose t0 leads no run exits).
// The WG stages K, then V, tiles of tile_keys keys in shared memory, so each K/V element is read once per
// run and head group instead of once per query row; the next tile's K and V are loaded into registers while
// this tile is computed (fetch / stage). Row r = (token t0 + r / heads, head r % heads) covers
// key positions [c*chunk, min((c+1)*chunk, pos_r + 1)) (its own causal limit), with an online softmax,
// and writes the unnormalised partial (max m, sum l, acc[head_dim]) for attention_combine.comp.
//
// Batch invariance (attention.h): a row's arithmetic never depends on the other rows of its WG. Tiles
// start at the split's start, every dot product is one fma chain over d in increasing order (whichever
// thread computes it), a row's max/sum run over its own valid keys of the tile in increasing order, and
// its acc is updated by acc * alpha then an fma chain over the tile's keys in increasing order. Work a row
// sees only inside a block (a tile past its own end, keys past its end in a shared tile) adds alpha = 1 and
// p = 0 terms, which leave m, l and acc bit-identical (K/V are finite f16 values).
// PROBE (tuning builds only, never dispatched by the engine; sweep-attention --variants): 1 leaves out the
// scores, 2 the softmax, 3 fetch()'s K/V loads (the tiles are zeros), 4 the PV products, 5 all four.
// KV page layout (kernels/ops/kv_layout.h): page p, layer L holds K [page_size][kv_dim] then V
// [page_size][kv_dim], f16, pages of all layers contiguous; kv_dim = n_kv_heads * head_dim.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;  // 256 (attention_workgroup_size): 1 PV unit per thread covers 16 x 128

#define MAX_ROWS 32u
#define NEG_BIG -3.0e38

layout(set = 0, binding = 0) readonly buffer Q { float q[]; };
// Bindings 1..4: the page pool (kv_pool.glsl).
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
  uint heads_per_wg;  // query heads of one KV head per WG (the last group may have fewer)
  uint block_tokens;  // tokens per aligned block; heads_per_wg * block_tokens <= rows_cap
  uint tile_keys;     // keys per tile (a multiple of 4, fixed by head_dim: determinism)
  uint row_stride4;   // rows_cap / 4: vec4s per dim in qs4, per key in ps4
} pc;

// Sizes (attention.cpp checks them): head_dim * rows_cap <= 2048, tile_keys * (head_dim / 2 + 1) <= 2080,
// tile_keys * rows_cap <= 512. About 18.3 KiB in all: fewer bytes, more resident work groups (the bound).
shared vec4 qs4[512];  // q * scale, [d][row / 4]; rows past the run are 0
shared uint kvs[2080];  // the K tile, then the V tile: [key][d / 2] packed f16 pairs, stride head_dim / 2 + 1
shared vec4 ps4[128];   // scores, then probabilities: [key][row / 4]
shared vec4 alpha4[MAX_ROWS / 4];
shared uint row_end[MAX_ROWS];  // key end of each row in this split; 0: the row has no keys here
shared uint run_info[2];        // run length, max position of the run

#include "kv_pool.glsl"

uint kv_load(uint loc) { return kv_load4(loc)[loc & 3u]; }

// Rows of 16-byte pieces (head_dim a multiple of 8; attention.cpp checks that a tile is then at most
// FETCH_REGS pieces per thread): a thread loads its part of a K or V tile into registers (fetch) well before
// it is needed and stores it into kvs (stage), so the next tile's loads run under this tile's arithmetic, and
// a tile's K and V loads together. Other rows take load_tile.
#define FETCH_REGS 2u
bool fetch_fast() {
  return pc.head_dim % 8u == 0u;
}

// Stages keys (is_v = 0) or values (is_v = 1) [ts, ts + nk) of KV head kh into kvs, a word at a time; zeros
// up to tile_keys.
void load_tile(uint is_v, uint pt_off, uint kh, uint ts, uint nk, uint ks) {
  uint d2 = pc.head_dim / 2u;
  for (uint i = gl_LocalInvocationID.x; i < pc.tile_keys * d2; i += gl_WorkGroupSize.x) {
    uint jj = i / d2, w = i % d2;
    kvs[jj * ks + w] = jj < nk ? kv_load(kv_word(pt_off, ts + jj, kh, is_v) + w) : 0u;
  }
}

// This thread's words of the K (is_v 0) or V (1) rows [ts, ts + nk) of KV head kh; zeros past nk.
void fetch(uint is_v, uint pt_off, uint kh, uint ts, uint nk, out uvec4 r[FETCH_REGS]) {
#if defined(PROBE) && (PROBE == 3 || PROBE == 5)
  nk = 0u;
#endif
  uint d8 = pc.head_dim / 8u;
  [[unroll]] for (uint i = 0u; i < FETCH_REGS; ++i) {
    uint idx = gl_LocalInvocationID.x + i * gl_WorkGroupSize.x, jj = idx / d8;
    r[i] = uvec4(0u);
    if (jj < nk) r[i] = kv_load4(kv_word(pt_off, ts + jj, kh, is_v) + (idx % d8) * 4u);
  }
}

// Stores the words fetch() loaded into kvs ([key][d / 2], stride ks), zeros included.
void stage(uvec4 r[FETCH_REGS], uint ks) {
  uint d8 = pc.head_dim / 8u;
  [[unroll]] for (uint i = 0u; i < FETCH_REGS; ++i) {
    uint idx = gl_LocalInvocationID.x + i * gl_WorkGroupSize.x;
    if (idx >= pc.tile_keys * d8) break;
    uint o = (idx / d8) * ks + (idx % d8) * 4u;
    kvs[o] = r[i].x;
    kvs[o + 1u] = r[i].y;
    kvs[o + 2u] = r[i].z;
    kvs[o + 3u] = r[i].w;
  }
}

// The score of row (rb, rc) against the key at word kb of kvs: one fma chain over d in increasing order,
// four dimension pairs per pass with their loads first (the same chain: the loads only come earlier).
float dot_row(uint kb, uint rb, uint rc) {
  uint rs4 = pc.row_stride4, d2 = pc.head_dim / 2u;
  float s = 0.0;
  uint dp = 0u;
  for (; dp + 4u <= d2; dp += 4u) {
    vec2 k[4];
    float q[8];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      k[i] = unpackHalf2x16(kvs[kb + dp + i]);
      q[2u * i] = qs4[(2u * (dp + i)) * rs4 + rb][rc];
      q[2u * i + 1u] = qs4[(2u * (dp + i) + 1u) * rs4 + rb][rc];
    }
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      s = fma(q[2u * i], k[i].x, s);
      s = fma(q[2u * i + 1u], k[i].y, s);
    }
  }
  for (; dp < d2; ++dp) {
    vec2 k = unpackHalf2x16(kvs[kb + dp]);
    s = fma(qs4[(2u * dp) * rs4 + rb][rc], k.x, s);
    s = fma(qs4[(2u * dp + 1u) * rs4 + rb][rc], k.y, s);
  }
  return s;
}

// The scores of rows 4 rb .. 4 rb + 3 against the key at word kb: each the chain of dot_row.
vec4 dot_block(uint kb, uint rb) {
  uint rs4 = pc.row_stride4, d2 = pc.head_dim / 2u;
  vec4 s = vec4(0.0);
  uint dp = 0u;
  for (; dp + 4u <= d2; dp += 4u) {
    vec2 k[4];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) k[i] = unpackHalf2x16(kvs[kb + dp + i]);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      s = fma(qs4[(2u * (dp + i)) * rs4 + rb], k[i].xxxx, s);
      s = fma(qs4[(2u * (dp + i) + 1u) * rs4 + rb], k[i].yyyy, s);
    }
  }
  for (; dp < d2; ++dp) {
    vec2 k = unpackHalf2x16(kvs[kb + dp]);
    s = fma(qs4[(2u * dp) * rs4 + rb], k.xxxx, s);
    s = fma(qs4[(2u * dp + 1u) * rs4 + rb], k.yyyy, s);
  }
  return s;
}

// Scores of the tile for few rows (decode): one thread per (row, key).
void score_rows(uint nrb, uint ks) {
  uint rs4 = pc.row_stride4, kt = pc.tile_keys;
  for (uint u = gl_LocalInvocationID.x; u < nrb * 4u * kt; u += gl_WorkGroupSize.x) {
    uint r = u / kt, key = u % kt;
    ps4[key * rs4 + r / 4u][r & 3u] = dot_row(key * ks, r / 4u, r & 3u);
  }
}

// Scores of the tile for a block of rows (prefill): one thread per (4 rows, key); threads next to each
// other share the rows (q is a broadcast) and read different keys.
void score_blocks(uint nrb, uint ks) {
  uint rs4 = pc.row_stride4, kt = pc.tile_keys;
  for (uint u = gl_LocalInvocationID.x; u < nrb * kt; u += gl_WorkGroupSize.x) {
    uint rb = u / kt, key = u % kt;
    ps4[key * rs4 + rb] = dot_block(key * ks, rb);
  }
}

void main() {
  uint c = gl_WorkGroupID.x, t0 = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint group_heads = pc.n_heads / pc.n_kv_heads;
  uint groups = (group_heads + pc.heads_per_wg - 1u) / pc.heads_per_wg;
  uint kh = gl_WorkGroupID.y / groups, hg = gl_WorkGroupID.y % groups;
  uint hn = min(pc.heads_per_wg, group_heads - hg * pc.heads_per_wg);  // heads in this WG
  uint h0 = kh * group_heads + hg * pc.heads_per_wg;
  uint hd = pc.head_dim, d2 = hd / 2u, ks = d2 + 1u, kt = pc.tile_keys, rs4 = pc.row_stride4;

  uint pt_off = tokens[t0].x;
  if (t0 % pc.block_tokens != 0u && tokens[t0 - 1u].x == pt_off) return;  // uniform: t0 leads no run
  if (tid == 0u) {
    uint block_end = min(t0 - t0 % pc.block_tokens + pc.block_tokens, gl_NumWorkGroups.z);
    uint len = 1u, max_pos = tokens[t0].y;
    for (uint t = t0 + 1u; t < block_end; ++t) {
      uvec2 tk = tokens[t];
      if (tk.x != pt_off) break;
      ++len;
      max_pos = max(max_pos, tk.y);
    }
    run_info[0] = len;
    run_info[1] = max_pos;
  }
  barrier();
  uint start = c * pc.chunk;
  if (start > run_info[1]) return;  // uniform: no token of the run reaches this split
  uint wg_end = min(start + pc.chunk, run_info[1] + 1u);
  uint rows = run_info[0] * hn;
  uint nrb = (rows + 3u) / 4u;

  // The first tile's K and V loads go out before q is staged (fast path).
  bool fast = fetch_fast();
  uvec4 kr[FETCH_REGS], vr[FETCH_REGS];
  if (fast) {
    fetch(0u, pt_off, kh, start, min(kt, wg_end - start), kr);
    fetch(1u, pt_off, kh, start, min(kt, wg_end - start), vr);
  }
  if (tid < MAX_ROWS) {
    uint e = 0u;
    if (tid < rows) {
      uint pos = tokens[t0 + tid / hn].y;
      if (pos >= start) e = min(start + pc.chunk, pos + 1u);
    }
    row_end[tid] = e;
  }
  for (uint i = tid; i < nrb * 4u * hd; i += wg) {
    uint r = i / hd, d = i % hd;
    float v = 0.0;
    if (r < rows) v = q[(t0 + r / hn) * pc.q_stride + (h0 + r % hn) * hd + d] * pc.scale;
    qs4[d * rs4 + r / 4u][r & 3u] = v;
  }
  barrier();

  // This thread's PV unit: (row block, dim pair) = (tid / d2, tid % d2), if tid < nrb * d2 (<= 256 = the
  // work-group size); uend: the largest key end of its 4 rows.
  bool pv = tid < nrb * d2;
  uint pv_rb = tid / d2, pv_dp = tid % d2, uend = 0u;
  if (pv)
    uend = max(max(row_end[4u * pv_rb], row_end[4u * pv_rb + 1u]),
               max(row_end[4u * pv_rb + 2u], row_end[4u * pv_rb + 3u]));
  vec4 ax = vec4(0.0), ay = vec4(0.0);  // acc of dims 2 pv_dp and 2 pv_dp + 1 of the 4 rows

  float m = NEG_BIG, l = 0.0;  // the softmax state of row tid (tid < nrb * 4)
  uint my_end = tid < MAX_ROWS ? row_end[tid] : 0u;
  for (uint ts = start; ts < wg_end; ts += kt) {
    uint nk = min(kt, wg_end - ts);
    uint next = ts + kt, next_nk = next < wg_end ? min(kt, wg_end - next) : 0u;
    if (fast) stage(kr, ks);
    else load_tile(0u, pt_off, kh, ts, nk, ks);
    barrier();
    if (fast && next_nk > 0u) fetch(0u, pt_off, kh, next, next_nk, kr);  // under this tile's arithmetic
    // Few rows (decode): a thread per (row, key) keeps the threads busy; else a thread per (4 rows, key).
#if !defined(PROBE) || (PROBE != 1 && PROBE != 5)
    if (nrb <= 2u) score_rows(nrb, ks);
    else score_blocks(nrb, ks);
#endif
    barrier();
    if (tid < nrb * 4u) {
      uint rb = tid / 4u, rc = tid & 3u;
      float alpha = 1.0;
      uint nv = 0u;
#if defined(PROBE) && (PROBE == 2 || PROBE == 5)
      if (false) {
#else
      if (my_end > ts) {
#endif
        nv = min(kt, my_end - ts);
        float mt = ps4[rb][rc];  // max is exact in any order: four at a time
        uint j = 1u;
        for (; j + 4u <= nv; j += 4u) {
          float s0 = ps4[j * rs4 + rb][rc], s1 = ps4[(j + 1u) * rs4 + rb][rc];
          float s2 = ps4[(j + 2u) * rs4 + rb][rc], s3 = ps4[(j + 3u) * rs4 + rb][rc];
          mt = max(max(mt, s0), max(max(s1, s2), s3));
        }
        for (; j < nv; ++j) mt = max(mt, ps4[j * rs4 + rb][rc]);
        float m_new = max(m, mt);
        float sum = 0.0;  // summed in key order; four exponentials at a time
        j = 0u;
        for (; j + 4u <= nv; j += 4u) {
          float p[4];
          [[unroll]] for (uint i = 0u; i < 4u; ++i) p[i] = exp(ps4[(j + i) * rs4 + rb][rc] - m_new);
          [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            ps4[(j + i) * rs4 + rb][rc] = p[i];
            sum += p[i];
          }
        }
        for (; j < nv; ++j) {
          float p = exp(ps4[j * rs4 + rb][rc] - m_new);
          ps4[j * rs4 + rb][rc] = p;
          sum += p;
        }
        alpha = exp(m - m_new);
        l = l * alpha + sum;
        m = m_new;
      }
      for (uint j = nv; j < nk; ++j) ps4[j * rs4 + rb][rc] = 0.0;
      alpha4[rb][rc] = alpha;
    }
    if (fast) {  // the K tile is no longer read
      stage(vr, ks);
      if (next_nk > 0u) fetch(1u, pt_off, kh, next, next_nk, vr);
    } else {
      load_tile(1u, pt_off, kh, ts, nk, ks);
    }
    barrier();
#if defined(PROBE) && (PROBE == 4 || PROBE == 5)
    if (false) {
#else
    if (pv && uend > ts) {
#endif
      uint nj = min(kt, uend - ts);
      vec4 al = alpha4[pv_rb];
      vec4 a = ax * al, b = ay * al;
      uint j = 0u;
      for (; j + 4u <= nj; j += 4u) {  // in key order, four keys' loads first
        vec4 p[4];
        vec2 v[4];
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
          p[i] = ps4[(j + i) * rs4 + pv_rb];
          v[i] = unpackHalf2x16(kvs[(j + i) * ks + pv_dp]);
        }
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
          a = fma(p[i], v[i].xxxx, a);
          b = fma(p[i], v[i].yyyy, b);
        }
      }
      for (; j < nj; ++j) {
        vec4 p = ps4[j * rs4 + pv_rb];
        vec2 v = unpackHalf2x16(kvs[j * ks + pv_dp]);
        a = fma(p, v.xxxx, a);
        b = fma(p, v.yyyy, b);
      }
      ax = a;
      ay = b;
    }
    barrier();  // kvs and ps4 are rewritten by the next tile
  }

  uint stride = hd + 2u;
  if (tid < rows && my_end > 0u) {
    uint base = (((t0 + tid / hn) * pc.n_heads + h0 + tid % hn) * pc.max_splits + c) * stride;
    partial[base] = m;
    partial[base + 1u] = l;
  }
  if (pv) {
    for (uint rc = 0u; rc < 4u; ++rc) {
      uint r = pv_rb * 4u + rc;
      if (r >= rows || row_end[r] == 0u) continue;
      uint base = (((t0 + r / hn) * pc.n_heads + h0 + r % hn) * pc.max_splits + c) * stride + 2u + 2u * pv_dp;
      partial[base] = ax[rc];
      partial[base + 1u] = ay[rc];
    }
  }
}
