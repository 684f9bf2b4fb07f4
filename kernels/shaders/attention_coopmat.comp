#version 450
// attention_coopmat_d<HD>: attention_paged's split pass (attention.comp: the same grid, runs, partials and
// push constants) with both products on tensor cores through VK_KHR_cooperative_matrix, for prefill
// blocks. A work group of SG subgroups takes 16 SG rows (row r = token t0 + r / heads, head h0 + r % heads)
// of one KV head; subgroup s owns rows 16 s .. 16 s + 15. Per tile of BC keys the group stages K and V in
// shared memory; each subgroup computes its scores S = (q scale) K^T (f16 in, f32 out), runs the online
// softmax on them (two lanes a row), and adds P V to its output accumulators after scaling them by each
// row's alpha (a broadcast matrix of alphas multiplied element by element: two accumulators of one type
// hold the same elements in each invocation). At the end it writes the unnormalised partials (m, l, acc)
// that attention_combine.comp merges, or, when the whole context is one split (out_mode), the normalised
// output itself (f32, or f16 for a tensor-core o product), and no combine pass runs. Each thread loads its part of the next K/V tile into registers while
// the current one is multiplied. Q and P are rounded to f16; not batch-invariant (a token alone takes
// attention.comp).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// HD (head_dim, a multiple of 16) and SG (4 or 8) are build defines. Subgroups are 32 invocations
// (checked on the host).
#define ROWS (16u * SG)
#define BC 32u                  // keys per tile
#define DB (HD / 16u)           // 16-value blocks of a row
#define STRIDE (HD / 8u + 1u)   // uvec4s (8 halves) per staged K/V/q row: HD halves padded by 8
#define PSTRIDE (BC / 8u + 1u)  // uvec4s per row of P
// Scores: BC / 4 + 1 vec4s a row, so that a quarter subgroup's 16-byte reads of its softmax rows (two lanes a
// row, 16 keys each) fall in 8 different bank groups; with rows of exactly BC floats the two lanes' reads
// of key k of all 16 rows hit 2 banks (16-way conflicts on every score). The alpha broadcast and the
// output blocks are 16 x 16 with rows of 5 vec4s.
#define SSTRIDE4 (BC / 4u + 1u)
#define ASTRIDE4 5u
#define NEG_BIG -3.0e38
#define THREADS (32u * SG)
#define KV_SPLIT (THREADS / (2u * BC))  // threads per staged K/V row
#define KV_PIECES (HD / 8u / KV_SPLIT)   // uvec4s per thread and tile
layout(local_size_x = THREADS) in;

layout(set = 0, binding = 0) readonly buffer Q { vec4 q4[]; };
// Bindings 1..4: the page pool (kv_pool.glsl).
layout(set = 0, binding = 5) readonly buffer PageTable { uint page_table[]; };
layout(set = 0, binding = 6) readonly buffer Tokens { uvec2 tokens[]; };  // (page-table offset, position)
layout(set = 0, binding = 7) writeonly buffer Partial { float partial[]; };
// One split (out_mode 1 or 2): the output itself, f32 or f16 pairs, instead of partials.
layout(set = 0, binding = 8) writeonly buffer Out { uint out_words[]; };

layout(push_constant) uniform Push {  // attention.comp's; tile_keys and row_stride4 are unused here
  uint n_heads;
  uint n_kv_heads;
  uint head_dim;
  uint page_size;
  uint n_layers;
  uint layer;
  uint chunk;
  uint max_splits;
  uint q_stride;  // floats between tokens in q, a multiple of 4
  float scale;
  uint pages_per_binding;
  uint heads_per_wg;
  uint block_tokens;  // heads_per_wg * block_tokens <= ROWS
  uint tile_keys;
  uint row_stride4;
  uint out_stride;  // values between tokens in out
  uint out_mode;    // 0: partials; the output itself (one split): 1 f32, 2 f16 (out_stride and head_dim even)
} pc;

// 35 KiB at HD 128 and SG 4, 45 at SG 8: the K and V tile (64 q rows at a time at the start), each
// subgroup's P, and its scores (whose first 16 rows of ASTRIDE4 then hold the alpha broadcast, and at the end
// each 16x16 output block on its way out).
shared uvec4 kv_tile[2u * BC * STRIDE];
shared uvec4 p_tile[SG * 16u * PSTRIDE];
shared vec4 s_tile[SG * 16u * SSTRIDE4];
shared uint run_info[2];
shared float row_sum[SG * 16u];  // one split: each row's l, for the normalised output

#include "kv_pool.glsl"

// Staging of K and V tiles: thread tid carries piece kv_piece (KV_PIECES uvec4s) of key (rows 0..BC-1) or
// value (BC..2BC-1) row kv_row of the tile, loaded into kv_regs one tile ahead of its use.
uint kv_row, kv_piece;
uvec4 kv_regs[KV_PIECES];
void load_kv(uint pt_off, uint kh, uint ts, uint nk) {
  uint jj = kv_row % BC;
  bool inside = jj < nk;
  uint loc = inside ? kv_word(pt_off, ts + jj, kh, kv_row / BC) + 4u * KV_PIECES * kv_piece : 0u;
  [[unroll]] for (uint i = 0u; i < KV_PIECES; ++i) kv_regs[i] = inside ? kv_load4(loc + 4u * i) : uvec4(0u);
}

uvec4 pack8(float a[8]) {
  return uvec4(packHalf2x16(vec2(a[0], a[1])), packHalf2x16(vec2(a[2], a[3])), packHalf2x16(vec2(a[4], a[5])),
               packHalf2x16(vec2(a[6], a[7])));
}

// Key end (exclusive) of row r of this work group in the split starting at `start`: 0 when the row is
// padding or its token sits before the split.
uint row_end(uint r, uint rows, uint t0, uint hn, uint start) {
  if (r >= rows) return 0u;
  uint pos = tokens[t0 + r / hn].y;
  return pos >= start ? min(start + pc.chunk, pos + 1u) : 0u;
}

uint partial_base(uint r, uint t0, uint hn, uint h0, uint c) {
  return (((t0 + r / hn) * pc.n_heads + h0 + r % hn) * pc.max_splits + c) * (HD + 2u);
}

void main() {
  uint c = gl_WorkGroupID.x, t0 = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x;
  uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint group_heads = pc.n_heads / pc.n_kv_heads;
  uint groups = (group_heads + pc.heads_per_wg - 1u) / pc.heads_per_wg;
  uint kh = gl_WorkGroupID.y / groups, hg = gl_WorkGroupID.y % groups;
  uint hn = min(pc.heads_per_wg, group_heads - hg * pc.heads_per_wg);
  uint h0 = kh * group_heads + hg * pc.heads_per_wg;

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

  kv_row = tid / KV_SPLIT;
  kv_piece = tid % KV_SPLIT;
  load_kv(pt_off, kh, start, min(BC, wg_end - start));

  // q * scale as f16 rows in kv_tile, 64 rows (four subgroups') at a time, then each subgroup's 16 rows as
  // A matrices for the whole split.
  MAT_A qa[DB];
  [[unroll]] for (uint pass = 0u; pass < SG / 4u; ++pass) {
    for (uint i = tid; i < 64u * DB * 2u; i += THREADS) {
      uint r = 64u * pass + i / (DB * 2u), d8 = i % (DB * 2u);
      float v[8];
      if (r < rows) {
        uint o = ((t0 + r / hn) * pc.q_stride + (h0 + r % hn) * HD + 8u * d8) / 4u;
        vec4 a = q4[o] * pc.scale, b = q4[o + 1u] * pc.scale;
        v = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
      } else {
        v = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
      }
      kv_tile[(r - 64u * pass) * STRIDE + d8] = pack8(v);
    }
    barrier();
    if (sg / 4u == pass)
      [[unroll]] for (uint d = 0u; d < DB; ++d)
        coopMatLoad(qa[d], kv_tile, (16u * (sg % 4u)) * STRIDE + 2u * d, STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    barrier();  // the next pass, or the first tile, overwrites kv_tile
  }

  // This lane's softmax row (two lanes a row: keys 16 half .. 16 half + 15 of each tile).
  uint my_row = 16u * sg + lane / 2u, half_ = lane & 1u;
  uint my_end = row_end(my_row, rows, t0, hn, start);
  float m = NEG_BIG, l = 0.0;
  MAT_C o[DB];
  [[unroll]] for (uint d = 0u; d < DB; ++d) o[d] = MAT_C(0.0);

  uint s_base = sg * 16u * SSTRIDE4;
  for (uint ts = start; ts < wg_end; ts += BC) {
    [[unroll]] for (uint i = 0u; i < KV_PIECES; ++i)
      kv_tile[kv_row * STRIDE + KV_PIECES * kv_piece + i] = kv_regs[i];
    barrier();
    if (ts + BC < wg_end) load_kv(pt_off, kh, ts + BC, min(BC, wg_end - ts - BC));  // in flight meanwhile

    // S = q K^T: B(d, key) = K[key][d], column-major in the K tile.
    [[unroll]] for (uint j = 0u; j < BC / 16u; ++j) {
      MAT_C s = MAT_C(0.0);
      [[unroll]] for (uint d = 0u; d < DB; ++d) {
        MAT_B kb;
        coopMatLoad(kb, kv_tile, (16u * j) * STRIDE + 2u * d, STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
        s = coopMatMulAdd(qa[d], kb, s);
      }
      coopMatStore(s, s_tile, s_base + 4u * j, SSTRIDE4, gl_CooperativeMatrixLayoutRowMajor);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    // Online softmax of this lane's 16 keys; the pair's max and sum meet through a shuffle.
    float sv[16];
    float mt = NEG_BIG;
    [[unroll]] for (uint k4 = 0u; k4 < 4u; ++k4) {
      vec4 v = s_tile[s_base + (lane / 2u) * SSTRIDE4 + 4u * half_ + k4];
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        uint k = 4u * k4 + c;
        sv[k] = ts + 16u * half_ + k < my_end ? v[c] : NEG_BIG;
        mt = max(mt, sv[k]);
      }
    }
    mt = max(mt, subgroupShuffleXor(mt, 1u));
    float m_new = max(m, mt);
    float alpha = exp(m - m_new);
    float sum = 0.0;
    float p[8];
    [[unroll]] for (uint g = 0u; g < 2u; ++g) {
      [[unroll]] for (uint k = 0u; k < 8u; ++k) {
        uint kk = 8u * g + k;
        p[k] = ts + 16u * half_ + kk < my_end ? exp(sv[kk] - m_new) : 0.0;
        sum += p[k];
      }
      p_tile[(16u * sg + lane / 2u) * PSTRIDE + 2u * half_ + g] = pack8(p);
    }
    sum += subgroupShuffleXor(sum, 1u);
    l = l * alpha + sum;
    m = m_new;
    // o = o * alpha (per row) + P V. A row whose max did not move has alpha exactly 1: when no row of the
    // subgroup moved (most tiles after the first few) the broadcast and the products are skipped.
    if (subgroupAny(alpha != 1.0)) {
      subgroupBarrier();  // every lane has read its scores: the alphas overwrite the first rows
      s_tile[s_base + (lane / 2u) * ASTRIDE4 + 2u * half_] = vec4(alpha);
      s_tile[s_base + (lane / 2u) * ASTRIDE4 + 2u * half_ + 1u] = vec4(alpha);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      MAT_C al;
      coopMatLoad(al, s_tile, s_base, ASTRIDE4, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint d = 0u; d < DB; ++d)
        [[unroll]] for (int e = 0; e < o[d].length(); ++e) o[d][e] *= al[e];
    } else {
      subgroupMemoryBarrierShared();
      subgroupBarrier();  // P is read by the whole subgroup
    }
    [[unroll]] for (uint j = 0u; j < BC / 16u; ++j) {
      MAT_A pa;
      coopMatLoad(pa, p_tile, (16u * sg) * PSTRIDE + 2u * j, PSTRIDE, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint d = 0u; d < DB; ++d) {
        MAT_B vb;
        coopMatLoad(vb, kv_tile, (BC + 16u * j) * STRIDE + 2u * d, STRIDE, gl_CooperativeMatrixLayoutRowMajor);
        o[d] = coopMatMulAdd(pa, vb, o[d]);
      }
    }
    barrier();  // kv_tile is refilled, and this subgroup's scores rewritten, by the next tile
  }

  if (pc.out_mode != 0u) {  // the whole context in one split (the host checks): no combine pass
    if (half_ == 0u) row_sum[my_row] = l;
    [[unroll]] for (uint d = 0u; d < DB; ++d) {
      coopMatStore(o[d], s_tile, s_base, ASTRIDE4, gl_CooperativeMatrixLayoutRowMajor);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < 128u; e += 32u) {  // column pairs of the 16 x 16 block
        uint r = 16u * sg + e / 8u, col = 2u * (e % 8u);
        if (r >= rows) continue;
        vec4 blk = s_tile[s_base + (e / 8u) * ASTRIDE4 + col / 4u];
        vec2 v = ((col & 2u) == 0u ? blk.xy : blk.zw) / row_sum[r];
        uint at = (t0 + r / hn) * pc.out_stride + (h0 + r % hn) * HD + 16u * d + col;
        if (pc.out_mode == 2u) {
          out_words[at / 2u] = packFloat2x16(f16vec2(v));
        } else {
          out_words[at] = floatBitsToUint(v.x);
          out_words[at + 1u] = floatBitsToUint(v.y);
        }
      }
      subgroupBarrier();  // every lane has read the block before the next store
    }
    return;
  }
  if (half_ == 0u && my_end > 0u) {
    uint base = partial_base(my_row, t0, hn, h0, c);
    partial[base] = m;
    partial[base + 1u] = l;
  }
  [[unroll]] for (uint d = 0u; d < DB; ++d) {
    coopMatStore(o[d], s_tile, s_base, ASTRIDE4, gl_CooperativeMatrixLayoutRowMajor);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = lane; e < 256u; e += 32u) {
      uint r = 16u * sg + e / 16u;
      if (row_end(r, rows, t0, hn, start) > 0u)
        partial[partial_base(r, t0, hn, h0, c) + 2u + 16u * d + e % 16u] =
            s_tile[s_base + (e / 16u) * ASTRIDE4 + (e % 16u) / 4u][e % 4u];
    }
    subgroupBarrier();  // every lane has read the block before the next store
  }
}
