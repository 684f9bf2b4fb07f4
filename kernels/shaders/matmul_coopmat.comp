#version 450
// matmul_coopmat_<type>: the matmul of matmul.comp on tensor cores (cooperative matrices: f16 inputs, f32
// accumulation). A work group of SG_M x SG_N subgroups computes a BM x BN tile of Y^T (weight rows x
// tokens); each subgroup a (16 TM) x (16 TN) block as TM x TN 16x16 accumulators. Each k step of 32 decodes
// the W slice (BM rows) and converts the X slice (BN tokens) to f16 in shared memory; the next step's slices
// are loaded into registers while this step multiplies, and two shared buffers alternate, so one barrier
// per step separates the loads from the multiplies. Tiles that lie inside Y are stored straight from the
// accumulators; edge tiles go through shared memory with bounds checks.
// Built twice where the compiler allows: with VK_NV_cooperative_matrix, and (KHR_COOPMAT) with
// VK_KHR_cooperative_matrix. The tile shape is specialization constants. Not batch-invariant in the
// --deterministic sense (kernels/ops/matmul.h).
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
#define BM (SG_M * 16u * TM)
#define BN (SG_N * 16u * TN)
#define BK 32u
#define THREADS (SG_M * SG_N * 32u)
// Shared rows of BK halves padded by 8 (16 bytes) against bank conflicts, held as f16 pairs where the
// extension loads matrices from vector arrays (KHR) and as single halves where it does not (NV): PAIR
// halves per shared element, strides and offsets in elements.
#ifdef KHR_COOPMAT
#define SHARED_T f16vec2
#define PAIR 2u
#else
#define SHARED_T float16_t
#define PAIR 1u
#endif
#define STRIDE ((BK + 8u) / PAIR)

layout(set = 0, binding = 0) readonly buffer W { uint wq[]; };
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint k;
  uint ntok;
  uint row_bytes;
  uint x_stride;  // a multiple of 4 (checked on the host)
  uint y_stride;
  uint y_row0;    // row offset of this dispatch in y (weights split by rows)
  uint w_offset;  // byte offset of row 0 in the weight binding (bindings are aligned down)
} pc;

#include "matvec_blocks.glsl"

shared SHARED_T ws[2 * BM * STRIDE];  // [buffer][row][k]
shared SHARED_T xs[2 * BN * STRIDE];  // [buffer][token][k]
shared float staged[SG_M * SG_N * 256u];  // one 16x16 block per subgroup, for edge tiles

// Two consecutive halves at element e of ws (to_w) or xs.
void store_pair(bool to_w, uint e, f16vec2 v) {
#ifdef KHR_COOPMAT
  if (to_w) ws[e] = v; else xs[e] = v;
#else
  if (to_w) { ws[e] = v.x; ws[e + 1u] = v.y; } else { xs[e] = v.x; xs[e + 1u] = v.y; }
#endif
}

// Register stage of one k step's slices: groups of 8 values, (BM + BN) * 4 of them over THREADS threads.
#define W_GROUPS ((BM * 4u + THREADS - 1u) / THREADS)
#define X_GROUPS ((BN * 4u + THREADS - 1u) / THREADS)

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  uint t0 = gl_WorkGroupID.z * BN;
  if (r0 >= pc.rows) return;  // uniform: a padding group of the flattened grid
  uint sg = gl_SubgroupID;
  uint sm = (sg % SG_M) * 16u * TM, sn = (sg / SG_M) * 16u * TN;

  MAT_C acc[TM * TN];
  [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = MAT_C(0.0);

  f16vec2 wreg[W_GROUPS][4], xreg[X_GROUPS][4];
  // Loads step kt's slices into registers: W row lr, values 8 lg ..; X token lr, values 8 lg ...
  // Rows and tokens past the end read zeros; rows of float types are zero-padded past k.
  #define LOAD_STEP(kt)                                                                        \
    [[unroll]] for (uint i = 0u; i < W_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / 4u, lg = slot % 4u;                           \
      float v[8];                                                                              \
      if (lr < BM && r0 + lr < pc.rows) {                                                      \
        decode8(pc.w_offset + (r0 + lr) * pc.row_bytes, (kt) * 4u + lg, pc.k, v);             \
      } else {                                                                                 \
        [[unroll]] for (uint j = 0u; j < 8u; ++j) v[j] = 0.0;                                  \
      }                                                                                        \
      [[unroll]] for (uint j = 0u; j < 4u; ++j) wreg[i][j] = f16vec2(v[2u * j], v[2u * j + 1u]); \
    }                                                                                          \
    [[unroll]] for (uint i = 0u; i < X_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / 4u, lg = slot % 4u;                           \
      uint kx = (kt) * BK + 8u * lg;                                                           \
      vec4 a = vec4(0.0), b = vec4(0.0);                                                       \
      if (lr < BN && t0 + lr < pc.ntok && kx < pc.k) {                                         \
        uint xo = ((t0 + lr) * pc.x_stride + kx) / 4u;                                         \
        a = x4[xo];                                                                            \
        b = kx + 4u < pc.k ? x4[xo + 1u] : vec4(0.0);                                          \
        if (kx + 8u > pc.k) {                                                                  \
          for (uint j = 0u; j < 4u; ++j) {                                                     \
            if (kx + j >= pc.k) a[j] = 0.0;                                                    \
            if (kx + 4u + j >= pc.k) b[j] = 0.0;                                               \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
      xreg[i][0] = f16vec2(a.xy);                                                              \
      xreg[i][1] = f16vec2(a.zw);                                                              \
      xreg[i][2] = f16vec2(b.xy);                                                              \
      xreg[i][3] = f16vec2(b.zw);                                                              \
    }
  #define STORE_STEP(buf)                                                                      \
    [[unroll]] for (uint i = 0u; i < W_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / 4u, lg = slot % 4u;                           \
      if (lr < BM)                                                                             \
        [[unroll]] for (uint j = 0u; j < 4u; ++j) store_pair(true, ((buf) * BM + lr) * STRIDE + (8u * lg + 2u * j) / PAIR, wreg[i][j]); \
    }                                                                                          \
    [[unroll]] for (uint i = 0u; i < X_GROUPS; ++i) {                                          \
      uint slot = tid + i * THREADS, lr = slot / 4u, lg = slot % 4u;                           \
      if (lr < BN)                                                                             \
        [[unroll]] for (uint j = 0u; j < 4u; ++j) store_pair(false, ((buf) * BN + lr) * STRIDE + (8u * lg + 2u * j) / PAIR, xreg[i][j]); \
    }

  uint steps = (pc.k + BK - 1u) / BK;
  // PROBE_NO_LOADS / PROBE_NO_MULTIPLY (tuning builds only, never dispatched by the engine): time the
  // multiplies without the slices' loads, or the loads without the multiplies.
#ifdef PROBE_NO_LOADS
#define LOAD_STEP_IF(kt)
#else
#define LOAD_STEP_IF(kt) LOAD_STEP(kt)
#endif
  LOAD_STEP(0u);
  STORE_STEP(0u);
  barrier();
  for (uint kt = 0u; kt < steps; ++kt) {
    uint cur = kt & 1u;
    if (kt + 1u < steps) {
      LOAD_STEP_IF(kt + 1u);
    }
    [[unroll]] for (uint kk = 0u; kk < BK / PAIR; kk += 16u / PAIR) {  // 16 values per multiply
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
    if (kt + 1u < steps) {
      STORE_STEP(cur ^ 1u);
    }
    barrier();
  }

  // C[row][token] is y[token * y_stride + row]: column-major with stride y_stride.
  bool inside = r0 + BM <= pc.rows && t0 + BN <= pc.ntok && (pc.y_stride % 4u) == 0u && (pc.y_row0 % 4u) == 0u;
  [[unroll]] for (uint i = 0u; i < TM; ++i)
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint r = r0 + sm + 16u * i, t = t0 + sn + 16u * j;
      if (inside) {
        STORE_COL_MAJOR(acc[i * TN + j], y, t * pc.y_stride + pc.y_row0 + r, pc.y_stride);
      } else {
        STORE_COL_MAJOR(acc[i * TN + j], staged, sg * 256u, 16u);
        subgroupBarrier();  // the subgroup's stores are visible to its own loads below
        for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
          uint rr = r + e % 16u, tt = t + e / 16u;
          if (rr < pc.rows && tt < pc.ntok) y[tt * pc.y_stride + pc.y_row0 + rr] = staged[sg * 256u + e];
        }
        subgroupBarrier();
      }
    }
}
