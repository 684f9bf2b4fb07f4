#version 450
// matvec_<type>: y[t][r] = dot(W[r, :], x[t, :]) for a few tokens t. One work group per 4 weight rows (8 for one token); each
// thread takes 8-value groups of the rows (strided by the work-group size), loads the x values of every
// token once and applies them to the decoded values of all its rows.
// Batch invariance (the --deterministic contract): a token's sum is built by the same instruction sequence
// whatever the token count (per-token accumulators, explicit fma, all tokens reduced by the same subgroup +
// shared-memory tree, tokens grouped MAX_COLS per work group along z), so a token alone and in any batch
// gets bit-identical results on one device with one work-group size. The single-token variant (MAX_COLS 1)
// runs the same per-token operation sequence, so it agrees bit for bit with the batched one -- except for
// Q4_0, whose single-token build walks whole blocks per thread (faster, a different summation order); the
// host never uses that build where batch invariance is promised (kernels/ops/matvec.h).
// The fused builds of float weights (matvec_fused; batch-invariant as above, but not bit-equal to the unfused
// steps: the norm scales each token's sums, not x): NORM_IN: the product is of rms_norm(x) * norm_w, (x times
// norm_w) . W times 1 / rms. One token: x is the residual stream, multiplied by norm_w as it is loaded, and
// the work group gathers its sum of squares from the same loads (norm_group.glsl); batches: x arrives so
// multiplied, with each token's sum of squares, from norm_input.comp, which computes both as the one-token
// build does. SWIGLU_OUT: W is [gate; up] (up_row rows apart), a work group takes half its rows from each,
// and y[r] = silu(gate_r . x) * (up_r . x); ACCUMULATE: y += W x (the residual add).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;

// F32, F16, BF16 rows have any length (scalar x loads with a tail); block types use vec4 loads.
#define FLOAT_WEIGHTS (WTYPE == 0 || WTYPE == 1 || WTYPE == 30)
// Tokens per work group: 8, or 1 in the matvec1_* builds (SINGLE_TOKEN: fewer registers).
#ifdef SINGLE_TOKEN
#define MAX_COLS 1u
#else
#define MAX_COLS 8u
#endif
// Rows per work group: each x load serves all of them (x is re-read by every work group, so more rows means
// less x traffic); the single-token build affords more accumulators. The fused residual products take 4, so
// that llama3-1b's 2,048-row o and down make 512 work groups (1B F16 decode +3%, 8B +2% on an H100).
#if defined(SINGLE_TOKEN) && defined(ACCUMULATE)
#define NUM_ROWS 4u
#elif defined(SINGLE_TOKEN)
#define NUM_ROWS 8u
#else
#define NUM_ROWS 4u
#endif
#define MAX_SUBGROUPS 64u
#if defined(NORM_IN) || defined(SWIGLU_OUT) || defined(ACCUMULATE)
#define FUSED 1
#if !FLOAT_WEIGHTS
#error "the fused builds are builds of float weights"
#endif
#endif
// Output rows of a work group: NUM_ROWS weight rows, half of them gate and half up rows in SWIGLU_OUT.
#ifdef SWIGLU_OUT
#define OUT_ROWS (NUM_ROWS / 2u)
#else
#define OUT_ROWS NUM_ROWS
#endif
// Float rows: the row loop unrolled, so that every row's 16-byte load is issued before any is used.
#if FLOAT_WEIGHTS
#define ROWS_LOOP [[unroll]]
#else
#define ROWS_LOOP
#endif

layout(set = 0, binding = 0) readonly buffer W { uint wq[]; };
#if FLOAT_WEIGHTS
// Float rows are read 16 bytes at a time where they are 16-byte aligned (decode8q), and x 4 floats at a time
// where a token's x starts 16-byte aligned: the same bindings seen as vectors.
layout(set = 0, binding = 0) readonly buffer W4 { uvec4 wq4[]; };
#define HAS_WQ4 1
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer XV { vec4 x4[]; };
#else
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#endif
#ifdef ACCUMULATE
layout(set = 0, binding = 2) buffer Y { float y[]; };
#else
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
#endif
#if defined(NORM_IN) && defined(SINGLE_TOKEN)
layout(set = 0, binding = 3) readonly buffer NW { float norm_w[]; };
layout(set = 0, binding = 3) readonly buffer NWV { vec4 norm_w4[]; };
#define NORM_AS_LOADED 1  // x is the residual stream: norm_group on every group of it
#elif defined(NORM_IN)
layout(set = 0, binding = 3) readonly buffer NS { float norm_sums[]; };  // token t's sum of squares
#endif
// The SWIGLU build (matvec1_swiglu_<type>, one token) multiplies by silu(gate) * up computed as x is loaded:
// binding 1 holds gate and binding 3 up, in the same layout. It is the FFN down projection without a
// separate swiglu dispatch and barrier.
#ifdef SWIGLU
#if FLOAT_WEIGHTS
layout(set = 0, binding = 3) readonly buffer U { float up[]; };
layout(set = 0, binding = 3) readonly buffer UV { vec4 up4[]; };
#else
layout(set = 0, binding = 3) readonly buffer U { vec4 up4[]; };
#endif
#endif

#if FLOAT_WEIGHTS
float load_x(uint i) {
#ifdef SWIGLU
  float g = x[i];
  return g / (1.0 + exp(-g)) * up[i];
#else
  return x[i];
#endif
}
#endif
vec4 load_x4(uint i) {
#ifdef SWIGLU
  vec4 g = x4[i];
  return g / (1.0 + exp(-g)) * up4[i];
#else
  return x4[i];
#endif
}

layout(push_constant) uniform Push {
  uint rows;       // output features (rows of W)
  uint k;          // input features (row length)
  uint ntok;       // tokens
  uint row_bytes;  // bytes per weight row
  uint x_stride;   // floats between tokens in x
  uint y_stride;   // floats between tokens in y
  uint y_row0;    // row offset of this dispatch in y (weights split by rows)
  uint w_offset;  // byte offset of row 0 in the weight binding (bindings are aligned down)
#ifdef FUSED
  float eps;    // NORM_IN: the norm's epsilon
  uint up_row;  // SWIGLU_OUT: weight rows from a gate row to its up row
#endif
} pc;

#include "matvec_blocks.glsl"

shared float partial[MAX_SUBGROUPS * NUM_ROWS * MAX_COLS];

#ifdef NORM_AS_LOADED
#include "norm_group.glsl"
#endif

#if FLOAT_WEIGHTS && defined(SINGLE_TOKEN)
// 16-byte pieces of a group of 8 weights, and groups a thread loads a round: F16/BF16 two (4 was no faster:
// llama3-8b F16 146 against 150 tok/s on an H100), F32 one (its pieces take twice the registers).
#if WTYPE == T_F32
#define PIECES 2u
#define GROUPS_A_ROUND 1u
#else
#define PIECES 1u
#define GROUPS_A_ROUND 2u
#endif
// Weight i of a group from its pieces.
float group_weight(uvec4 w[PIECES], uint i) {
#if WTYPE == T_F32
  return uintBitsToFloat(w[i / 4u][i % 4u]);
#elif WTYPE == T_F16
  return unpackHalf2x16(w[0][i / 2u])[i % 2u];
#else
  uint h = w[0][i / 2u];
  return uintBitsToFloat((i % 2u) == 0u ? h << 16 : h & 0xFFFF0000u);
#endif
}
// One token's group G (x values XA, XB; the rows' pieces in W[r]) added into acc (and its x's squares
// into sum_sq), operation for operation as the generic loop adds a group.
#ifdef NORM_AS_LOADED
#define NORM_GROUP(X, G) norm_group(X, 8u * (G), pc.k, sum_sq);
#else
#define NORM_GROUP(X, G)
#endif
#define SUM_GROUP(W, XA, XB, G)                                             \
  {                                                                         \
    float xg[8] = float[8](XA.x, XA.y, XA.z, XA.w, XB.x, XB.y, XB.z, XB.w); \
    NORM_GROUP(xg, G)                                                       \
    [[unroll]] for (uint r = 0u; r < NUM_ROWS; ++r) {                       \
      precise float s = 0.0;                                                \
      [[unroll]] for (uint i = 0u; i < 8u; ++i)                             \
        s = fma(group_weight(W[r], i), xg[i], s);                           \
      acc[r][0] = fma(1.0, s, acc[r][0]);                                   \
    }                                                                       \
  }
#endif
#ifdef NORM_AS_LOADED
shared float sum_sq_of[MAX_SUBGROUPS];
#endif

void main() {
  uint row0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * OUT_ROWS;
  if (row0 >= pc.rows) return;  // uniform across the work group
  uint tok0 = gl_WorkGroupID.z * MAX_COLS;
  uint ncols = min(MAX_COLS, pc.ntok - tok0);
  uint nrows = min(OUT_ROWS, pc.rows - row0);
#ifdef NORM_AS_LOADED
  precise float sum_sq = 0.0;  // of this thread's x values
#endif
  uint tid = gl_LocalInvocationID.x;
  uint groups = (pc.k + 7u) / 8u;

  precise float acc[NUM_ROWS][MAX_COLS];
  for (uint r = 0u; r < NUM_ROWS; ++r)
    for (uint t = 0u; t < MAX_COLS; ++t) acc[r][t] = 0.0;

  // No data-dependent branches inside a group: rows past the end re-read the last row and tokens past the
  // end re-read the last token (their sums are never stored), so the loads can be issued together.
  uint last_row = pc.rows - 1u, last_tok = pc.ntok - 1u;
#if WTYPE == T_Q4_0 && defined(SINGLE_TOKEN)
  // Q4_0, one token: a thread takes whole 32-value blocks (consecutive threads, consecutive blocks), so each row's
  // scale and 16 quant bytes are loaded once per block as 5 aligned words (the block is 2-byte aligned);
  // the 4 groups of 8 values then come from those registers: bytes 0-7 / 8-15, low then high nibbles.
  uint blocks = pc.k / 32u;
  for (uint blk = tid; blk < blocks; blk += gl_WorkGroupSize.x) {
    // Fully unrolled: the register arrays below must never be indexed dynamically (that spills them).
    float d[NUM_ROWS];
    uint q[NUM_ROWS][4];
    [[unroll]] for (uint r = 0u; r < NUM_ROWS; ++r) {
      uint bo = pc.w_offset + min(row0 + r, last_row) * pc.row_bytes + 18u * blk;
      d[r] = w_f16(bo);
      uint i = (bo + 2u) >> 2, sh = ((bo + 2u) & 2u) << 3;  // the quants start sh bits into word i
      uint w0 = wq[i], w1 = wq[i + 1u], w2 = wq[i + 2u], w3 = wq[i + 3u];
      uint w4 = wq[min(i + 4u, uint(wq.length()) - 1u)];
      q[r][0] = sh == 0u ? w0 : (w0 >> 16) | (w1 << 16);
      q[r][1] = sh == 0u ? w1 : (w1 >> 16) | (w2 << 16);
      q[r][2] = sh == 0u ? w2 : (w2 >> 16) | (w3 << 16);
      q[r][3] = sh == 0u ? w3 : (w3 >> 16) | (w4 << 16);
    }
    [[unroll]] for (uint sub = 0u; sub < 4u; ++sub) {
      uint e0 = 32u * blk + 8u * (sub & 1u) + 16u * (sub >> 1);  // first x index of this group of 8
      float xv[MAX_COLS][8];
      [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
        uint xo = min(tok0 + t, last_tok) * pc.x_stride + e0;
        vec4 a = load_x4(xo / 4u), b = load_x4(xo / 4u + 1u);
        xv[t][0] = a.x; xv[t][1] = a.y; xv[t][2] = a.z; xv[t][3] = a.w;
        xv[t][4] = b.x; xv[t][5] = b.y; xv[t][6] = b.z; xv[t][7] = b.w;
      }
      [[unroll]] for (uint r = 0u; r < NUM_ROWS; ++r) {
        // Values e0.. are the low (sub 0, 1) or high (sub 2, 3) nibbles of bytes 8*(sub&1) .. +7.
        uint nib_lo = (q[r][2u * (sub & 1u)] >> (4u * (sub >> 1))) & 0x0F0F0F0Fu;
        uint nib_hi = (q[r][2u * (sub & 1u) + 1u] >> (4u * (sub >> 1))) & 0x0F0F0F0Fu;
        float v[8];
        for (uint i = 0u; i < 4u; ++i) {
          v[i] = small_int((nib_lo >> (8u * i)) & 0xFFu, 8.0);
          v[i + 4u] = small_int((nib_hi >> (8u * i)) & 0xFFu, 8.0);
        }
        [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
          precise float s8 = 0.0;
          [[unroll]] for (uint i = 0u; i < 8u; ++i) s8 = fma(v[i], xv[t][i], s8);
          acc[r][t] = fma(d[r], s8, acc[r][t]);
        }
      }
    }
  }
#else
#if FLOAT_WEIGHTS && defined(SINGLE_TOKEN)
  // Float rows of whole 16-byte pieces, one token: GROUPS_A_ROUND groups a round (g, g + the work-group size,
  // ...), the loads of all issued before any sum (else a long row's loop is a memory round trip a group),
  // each group summed as the loop below sums it, in the same order: the same bits.
  uint wgs = gl_WorkGroupSize.x;
  if ((pc.row_bytes & 15u) == 0u && (pc.w_offset & 15u) == 0u && (pc.k & 7u) == 0u && (pc.x_stride & 3u) == 0u) {
    uint wrow[NUM_ROWS];  // each row's first uvec4
    [[unroll]] for (uint r = 0u; r < NUM_ROWS; ++r) {
      uint wr = min(row0 + r % OUT_ROWS, last_row);
#ifdef SWIGLU_OUT
      wr += (r / OUT_ROWS) * pc.up_row;
#endif
      wrow[r] = (pc.w_offset + wr * pc.row_bytes) >> 4;
    }
    for (uint g = tid; g < groups; g += GROUPS_A_ROUND * wgs) {
      uvec4 w[GROUPS_A_ROUND][NUM_ROWS][PIECES];
      vec4 xa[GROUPS_A_ROUND], xb[GROUPS_A_ROUND];
      uint gj[GROUPS_A_ROUND];
      [[unroll]] for (uint j = 0u; j < GROUPS_A_ROUND; ++j) {
        gj[j] = g + j * wgs < groups ? g + j * wgs : g;  // past the row: g again, loaded and not summed
        xa[j] = load_x4(2u * gj[j]);
        xb[j] = load_x4(2u * gj[j] + 1u);
        [[unroll]] for (uint r = 0u; r < NUM_ROWS; ++r)
          [[unroll]] for (uint p = 0u; p < PIECES; ++p) w[j][r][p] = wq4[wrow[r] + PIECES * gj[j] + p];
      }
      [[unroll]] for (uint j = 0u; j < GROUPS_A_ROUND; ++j)
        if (j == 0u || g + j * wgs < groups) SUM_GROUP(w[j], xa[j], xb[j], gj[j])
    }
  } else
#endif
  // Consecutive threads take consecutive 8-value groups, so a subgroup's loads of W and x are contiguous.
  for (uint g = tid; g < groups; g += gl_WorkGroupSize.x) {
    {
      uint e0 = 8u * g;
      // The 8 x values of every token, loaded once and applied to all rows of the group.
      float xv[MAX_COLS][8];
      [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
        uint xo = min(tok0 + t, last_tok) * pc.x_stride + e0;
#if FLOAT_WEIGHTS
        if (e0 + 8u <= pc.k && (xo & 3u) == 0u) {  // the same values as the scalar loads below
          vec4 a = load_x4(xo / 4u), b = load_x4(xo / 4u + 1u);
          xv[t][0] = a.x; xv[t][1] = a.y; xv[t][2] = a.z; xv[t][3] = a.w;
          xv[t][4] = b.x; xv[t][5] = b.y; xv[t][6] = b.z; xv[t][7] = b.w;
        } else {
          for (uint i = 0u; i < 8u; ++i) xv[t][i] = (e0 + i < pc.k) ? load_x(xo + i) : 0.0;
        }
#ifdef NORM_AS_LOADED
        norm_group(xv[t], e0, pc.k, sum_sq);
#endif
#else
        // Quantized rows are whole blocks of 32 and x_stride % 4 == 0 (checked on the host): vec4 loads.
        vec4 a = load_x4(xo / 4u), b = load_x4(xo / 4u + 1u);
        xv[t][0] = a.x; xv[t][1] = a.y; xv[t][2] = a.z; xv[t][3] = a.w;
        xv[t][4] = b.x; xv[t][5] = b.y; xv[t][6] = b.z; xv[t][7] = b.w;
#endif
      }
#if DECODE_HAS_B
      precise float sx[MAX_COLS];  // sum of the 8 x values, for the block-minimum term
      for (uint t = 0u; t < MAX_COLS; ++t) {
        sx[t] = 0.0;
        for (uint i = 0u; i < 8u; ++i) sx[t] += xv[t][i];
      }
#endif
      ROWS_LOOP for (uint r = 0u; r < NUM_ROWS; ++r) {
        float q[8], a, b;
        uint wr = min(row0 + r % OUT_ROWS, last_row);
#ifdef SWIGLU_OUT
        wr += (r / OUT_ROWS) * pc.up_row;
#endif
        decode8q(pc.w_offset + wr * pc.row_bytes, g, pc.k, q, a, b);
        for (uint t = 0u; t < MAX_COLS; ++t) {
          precise float s = 0.0;
          for (uint i = 0u; i < 8u; ++i) s = fma(q[i], xv[t][i], s);
#if DECODE_HAS_B
          acc[r][t] = fma(a, s, fma(b, sx[t], acc[r][t]));
#else
          acc[r][t] = fma(a, s, acc[r][t]);
#endif
        }
      }
    }
  }
#endif

  for (uint r = 0u; r < NUM_ROWS; ++r)
    for (uint t = 0u; t < MAX_COLS; ++t) {
      float s = subgroupAdd(acc[r][t]);
      if (subgroupElect()) partial[(gl_SubgroupID * NUM_ROWS + r) * MAX_COLS + t] = s;
    }
#ifdef NORM_AS_LOADED
  float ss = subgroupAdd(sum_sq);
  if (subgroupElect()) sum_sq_of[gl_SubgroupID] = ss;
#endif
  barrier();
  uint r = tid / MAX_COLS, t = tid % MAX_COLS;
  if (r < nrows && t < ncols) {
    precise float s = 0.0;
    for (uint sg = 0u; sg < gl_NumSubgroups; ++sg) s += partial[(sg * NUM_ROWS + r) * MAX_COLS + t];
#ifdef SWIGLU_OUT
    precise float up = 0.0;
    for (uint sg = 0u; sg < gl_NumSubgroups; ++sg) up += partial[(sg * NUM_ROWS + OUT_ROWS + r) * MAX_COLS + t];
#endif
#ifdef NORM_IN
#ifdef NORM_AS_LOADED
    precise float total = 0.0;
    for (uint sg = 0u; sg < gl_NumSubgroups; ++sg) total += sum_sq_of[sg];
#else
    float total = norm_sums[tok0 + t];
#endif
    float inv_rms = inversesqrt(total / float(pc.k) + pc.eps);
    s *= inv_rms;
#ifdef SWIGLU_OUT
    up *= inv_rms;
#endif
#endif
#ifdef SWIGLU_OUT
    s = s / (1.0 + exp(-s)) * up;
#endif
    uint yo = (tok0 + t) * pc.y_stride + pc.y_row0 + row0 + r;
#ifdef ACCUMULATE
    s += y[yo];
#endif
    y[yo] = s;
  }
}
