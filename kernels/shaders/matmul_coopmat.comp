#version 450
// matmul_coopmat_<type>: the matmul of matmul.comp on tensor cores (cooperative matrices: f16 inputs, f32
// accumulation). A work group of SG_M x SG_N subgroups computes a BM x BN tile of Y^T (weight rows x
// tokens); each subgroup a (16 TM) x (16 TN) block as TM x TN 16x16 accumulators. Each k step of BK decodes
// the W slice (BM rows) and converts the X slice (BN tokens) to f16 in shared memory; the next step's slices
// are loaded into registers while this step multiplies, and with two shared buffers alternating one barrier
// per step separates the loads from the multiplies. Tiles that lie inside Y are stored straight from the
// accumulators; edge tiles go through shared memory with bounds checks.
// Split-K (few tokens: too few tiles to fill the device): work group z = split * token_tiles + token tile
// runs k steps [split * split_steps, (split + 1) * split_steps) and stores its partial tile at
// split * split_stride floats into y; reduce_splits.comp sums the splits.
// Built with VK_NV_cooperative_matrix, and where the compiler allows (KHR_COOPMAT) with
// VK_KHR_cooperative_matrix, whose build also comes with x as f16 (X_F16: half the bytes of x for each work
// group to read, no conversion; convert.comp makes it once per product). The tile shape is specialization
// constants. Not batch-invariant in the --deterministic sense (kernels/ops/matmul.h).
#ifdef KHR_COOPMAT
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

#ifdef KHR_COOPMAT
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define LOAD_ROW_MAJOR(m, buf, o, s) coopMatLoad(m, buf, o, s, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_COL_MAJOR(m, buf, o, s) coopMatLoad(m, buf, o, s, gl_CooperativeMatrixLayoutColumnMajor)
#define STORE_COL_MAJOR(m, buf, o, s) coopMatStore(m, buf, o, s, gl_CooperativeMatrixLayoutColumnMajor)
#define MUL_ADD(a, b, c) coopMatMulAdd(a, b, c)
#else
#define MAT_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define LOAD_ROW_MAJOR(m, buf, o, s) coopMatLoadNV(m, buf, o, s, false)
#define LOAD_COL_MAJOR(m, buf, o, s) coopMatLoadNV(m, buf, o, s, true)
#define STORE_COL_MAJOR(m, buf, o, s) coopMatStoreNV(m, buf, o, s, true)
#define MUL_ADD(a, b, c) coopMatMulAddNV(a, b, c)
#endif

// Tile shape: subgroups along the weight rows (SG_M) and the tokens (SG_N); 16x16 blocks per subgroup
// (TM x TN). Subgroups are 32 invocations (checked on the host).
layout(constant_id = 0) const uint SG_M = 4u;
layout(constant_id = 1) const uint SG_N = 2u;
layout(constant_id = 2) const uint TM = 2u;
layout(constant_id = 3) const uint TN = 4u;
layout(local_size_x_id = 4) in;  // 32 * SG_M * SG_N
// Values of k per step, a multiple of 32, and shared buffers: 2 alternate (one barrier a step), 1 is
// refilled after a second barrier (half the shared memory, for deeper steps within the 48 KB a work group
// may have).
layout(constant_id = 5) const uint BK = 32u;
layout(constant_id = 6) const uint BUFFERS = 2u;
#define BM (SG_M * 16u * TM)
#define BN (SG_N * 16u * TN)
#define THREADS (SG_M * SG_N * 32u)
// Shared rows of BK halves padded by 8 (16 bytes) against bank conflicts, held as 16-byte vectors of 8
// halves where the extension loads matrices from vector arrays (KHR: one store per 8 values) and as single
// halves where it does not (NV): HALVES per shared element, strides and offsets in elements.
#ifdef KHR_COOPMAT
#define SHARED_T uvec4
#define HALVES 8u
#else
#define SHARED_T float16_t
#define HALVES 1u
#endif
#define STRIDE ((BK + 8u) / HALVES)

// Device formats and K-quants (rows 16-byte aligned) are decoded 16 values at a time from 16-byte loads
// straight into f16 pairs (tile_decode.glsl); other types 8 at a time through matvec_blocks.glsl.
#if WTYPE == 102 || WTYPE == 108 || WTYPE == 12 || WTYPE == 13 || WTYPE == 114
#define FAST_DECODE
layout(set = 0, binding = 0) readonly buffer W { uvec4 w4[]; };
#else
layout(set = 0, binding = 0) readonly buffer W { uint wq[]; };
#endif
#ifdef X_F16
layout(set = 0, binding = 1) readonly buffer X { uvec4 xh[]; };  // 8 halves each
#else
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#endif
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint k;
  uint ntok;
  uint row_bytes;
  uint x_stride;  // a multiple of 4 (X_F16: of 8, and k too; checked on the host)
  uint y_stride;
  uint y_row0;    // row offset of this dispatch in y (weights split by rows)
  uint w_offset;  // byte offset of row 0 in the weight binding (bindings are aligned down)
  uint split_steps;   // k steps per split (at least all of them: no split)
  uint split_stride;  // floats between the splits' partial outputs in y (a multiple of 4)
} pc;

#ifdef FAST_DECODE
#include "tile_decode.glsl"
#define W_PIECE 16u  // values of a row one thread decodes per k step
#else
#include "matvec_blocks.glsl"
#define W_PIECE 8u
#endif

shared SHARED_T ws[BUFFERS * BM * STRIDE];  // [buffer][row][k]
shared SHARED_T xs[BUFFERS * BN * STRIDE];  // [buffer][token][k]
shared float staged[SG_M * SG_N * 256u];  // one 16x16 block per subgroup, for edge tiles

// Eight consecutive halves (as four packed pairs) at element e of ws (to_w) or xs.
void store8(bool to_w, uint e, uvec4 v) {
#ifdef KHR_COOPMAT
  if (to_w) ws[e] = v; else xs[e] = v;
#else
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    f16vec2 p = unpackFloat2x16(v[j]);
    if (to_w) { ws[e + 2u * j] = p.x; ws[e + 2u * j + 1u] = p.y; }
    else { xs[e + 2u * j] = p.x; xs[e + 2u * j + 1u] = p.y; }
  }
#endif
}

// Values 8 kx .. 8 kx + 7 of token t as packed f16 pairs, zeros past the token's k values (X_F16: k is a
// multiple of 8, so a group is whole or absent).
uvec4 load_x8(bool inside, uint t, uint kx) {
  if (!inside || kx >= pc.k) return uvec4(0u);
#ifdef X_F16
  return xh[(t * pc.x_stride + kx) / 8u];
#else
  uint xo = (t * pc.x_stride + kx) / 4u;
  vec4 a = x4[xo];
  vec4 b = kx + 4u < pc.k ? x4[xo + 1u] : vec4(0.0);
  if (kx + 8u > pc.k) {
    for (uint j = 0u; j < 4u; ++j) {
      if (kx + j >= pc.k) a[j] = 0.0;
      if (kx + 4u + j >= pc.k) b[j] = 0.0;
    }
  }
  return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
#endif
}

// Register stage of one k step's slices over THREADS threads: W pieces of W_PIECE values (BK / W_PIECE a
// row), X groups of 8 values (BK / 8 a token).
#define W_PIECES (BK / W_PIECE)
#define X_PIECES (BK / 8u)
#define W_GROUPS ((BM * W_PIECES + THREADS - 1u) / THREADS)
#define X_GROUPS ((BN * X_PIECES + THREADS - 1u) / THREADS)

// Piece p (W_PIECE values from W_PIECE * p) of weight row `row` into f16 pairs; zeros when !inside or
// past the row (a last step of BK > 32 may be partial; rows are whole blocks of at least 32).
void load_w_piece(bool inside, uint row, uint p, out f16vec2 v[W_PIECE / 2u]) {
  if (!inside || p * W_PIECE >= pc.k) {
    [[unroll]] for (uint j = 0u; j < W_PIECE / 2u; ++j) v[j] = f16vec2(0.0);
    return;
  }
#ifdef FAST_DECODE
  decode16(pc.w_offset / 16u + row * (pc.row_bytes / 16u), p, v);
#else
  float f[8];
  decode8(pc.w_offset + row * pc.row_bytes, p, pc.k, f);
  [[unroll]] for (uint j = 0u; j < 4u; ++j) v[j] = f16vec2(f[2u * j], f[2u * j + 1u]);
#endif
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  uint token_tiles = (pc.ntok + BN - 1u) / BN;
  uint split = gl_WorkGroupID.z / token_tiles;
  uint t0 = (gl_WorkGroupID.z % token_tiles) * BN;
  if (r0 >= pc.rows) return;  // uniform: a padding group of the flattened grid
  uint sg = gl_SubgroupID;
  uint sm = (sg % SG_M) * 16u * TM, sn = (sg / SG_M) * 16u * TN;

  MAT_C acc[TM * TN];
  [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = MAT_C(0.0);

  f16vec2 wreg[W_GROUPS][W_PIECE / 2u];
  uvec4 xreg[X_GROUPS];
  // Loads step kt's slices into registers: W row lr, piece lg; X token lr, values 8 lg ...
  // Rows and tokens past the end read zeros; rows of float types are zero-padded past k.
  #define LOAD_STEP(kt)                                                                        \
    [[unroll]] for (uint i = 0u; i < W_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / W_PIECES, lg = slot % W_PIECES;               \
      load_w_piece(lr < BM && r0 + lr < pc.rows, r0 + lr, (kt) * W_PIECES + lg, wreg[i]);      \
    }                                                                                          \
    [[unroll]] for (uint i = 0u; i < X_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / X_PIECES, lg = slot % X_PIECES;               \
      xreg[i] = load_x8(lr < BN && t0 + lr < pc.ntok, t0 + lr, (kt) * BK + 8u * lg);           \
    }
  // Stores them into shared buffer buf, 8 values per store.
  #define STORE_STEP(buf)                                                                      \
    [[unroll]] for (uint i = 0u; i < W_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / W_PIECES, lg = slot % W_PIECES;               \
      if (lr < BM)                                                                             \
        [[unroll]] for (uint j = 0u; j < W_PIECE / 8u; ++j)                                    \
          store8(true, ((buf) * BM + lr) * STRIDE + (W_PIECE * lg + 8u * j) / HALVES,          \
                 uvec4(packFloat2x16(wreg[i][4u * j]), packFloat2x16(wreg[i][4u * j + 1u]),    \
                       packFloat2x16(wreg[i][4u * j + 2u]), packFloat2x16(wreg[i][4u * j + 3u]))); \
    }                                                                                          \
    [[unroll]] for (uint i = 0u; i < X_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / X_PIECES, lg = slot % X_PIECES;               \
      if (lr < BN) store8(false, ((buf) * BN + lr) * STRIDE + 8u * lg / HALVES, xreg[i]);      \
    }

  uint kt0 = split * pc.split_steps;
  uint steps = min((pc.k + BK - 1u) / BK, kt0 + pc.split_steps);  // this split's end
  // PROBE_NO_LOADS / PROBE_NO_MULTIPLY (tuning builds only, never dispatched by the engine): time the
  // multiplies without the slices' loads, or the loads without the multiplies.
#ifdef PROBE_NO_LOADS
#define LOAD_STEP_IF(kt)
#else
#define LOAD_STEP_IF(kt) LOAD_STEP(kt)
#endif
  LOAD_STEP(kt0);
  STORE_STEP(0u);
  barrier();
  for (uint kt = kt0; kt < steps; ++kt) {
    uint cur = BUFFERS == 2u ? (kt - kt0) & 1u : 0u;
    if (kt + 1u < steps) {
      LOAD_STEP_IF(kt + 1u);
    }
    [[unroll]] for (uint kk = 0u; kk < BK / HALVES; kk += 16u / HALVES) {  // 16 values per multiply
      MAT_A a[TM];
      MAT_B b[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        LOAD_ROW_MAJOR(a[i], ws, (cur * BM + sm + 16u * i) * STRIDE + kk, STRIDE);
      [[unroll]] for (uint j = 0u; j < TN; ++j)
        LOAD_COL_MAJOR(b[j], xs, (cur * BN + sn + 16u * j) * STRIDE + kk, STRIDE);
#ifndef PROBE_NO_MULTIPLY
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = MUL_ADD(a[i], b[j], acc[i * TN + j]);
#endif
    }
    if (BUFFERS == 1u) barrier();  // every subgroup has read the buffer the stores below refill
    if (kt + 1u < steps) {
      STORE_STEP(BUFFERS == 2u ? cur ^ 1u : 0u);
    }
    barrier();
  }

  // C[row][token] is y[token * y_stride + row]: column-major with stride y_stride.
  bool inside = r0 + BM <= pc.rows && t0 + BN <= pc.ntok && (pc.y_stride % 4u) == 0u && (pc.y_row0 % 4u) == 0u;
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint r = r0 + sm + 16u * i, t = t0 + sn + 16u * j;
      if (inside) {
        STORE_COL_MAJOR(acc[i * TN + j], y, split * pc.split_stride + t * pc.y_stride + pc.y_row0 + r, pc.y_stride);
      } else {
        STORE_COL_MAJOR(acc[i * TN + j], staged, sg * 256u, 16u);
        subgroupBarrier();  // the subgroup's stores are visible to its own loads below
        for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
          uint rr = r + e % 16u, tt = t + e / 16u;
          if (rr < pc.rows && tt < pc.ntok)
            y[split * pc.split_stride + tt * pc.y_stride + pc.y_row0 + rr] = staged[sg * 256u + e];
        }
        subgroupBarrier();
      }
    }
}
