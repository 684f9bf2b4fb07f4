#version 450
// matvec_q8_<mode>_t<cols>_<type>: y[t][r] = dot(W[r, :], x[t, :]) on 8-bit-quantized activations, for the
// decode step and small batches. x is quantized inside the shader, 16 values at a time (scale d = max|x| /
// 127, q = round(x / d)), and each weight unit of 32 values is multiplied by integer dot products of packed
// bytes (GL_EXT_integer_dot_product where the device has it (INT_DOT), the same integers otherwise), then
// scaled in float. Per instruction that is several times the work of decoding every weight to a float, so
// the product streams weights near the memory bandwidth.
//
// Work: thread t of a row lane takes the weight units u = t, t + TPR, ... of the row (TPR threads per lane,
// `tpr`); a work group holds WG / TPR lanes of NUM_ROWS rows each. A thread quantizes the x values of its
// unit once and applies them to all of its rows (and every token of the group, up to MAX_COLS).
// Modes (defines): NORM: x is rms_norm(x) * norm_weight (the norm is computed here from the same x, so it
// needs no dispatch or barrier of its own); ACCUMULATE: y += W x (a residual add); SWIGLU: the work group
// also computes the up row `up_row` rows below each gate row and writes silu(gate) * up. PREQUANT: x comes
// already quantized by quantize_q8.comp (bytes, scale and sum per 16 values, and with NORM each token's
// 1 / rms), which batches use so that each x group is quantized once instead of once per work group.
// The sum of squares of a norm is taken in one canonical order here and in quantize_q8.comp (every thread
// strides over the row's vec4s, then the subgroup sums in order), and a group's bytes depend only on its 16
// values, so both ways give the same bits.
// Batch invariance: a token's result is built by the same operations in the same order whatever MAX_COLS
// and the token count (the unit split depends only on the row length and the work-group size, the
// reductions are fixed trees), so one token alone and in any batch get bit-identical results.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#ifdef INT_DOT
#extension GL_EXT_integer_dot_product : require
#endif

layout(local_size_x_id = 0) in;
// Rows per lane and tokens per work group: specialization constants, so one shader serves the decode step
// (1 token) and batches (8), and the tuning harness tries other shapes without a rebuild.
layout(constant_id = 1) const uint NUM_ROWS = 4u;
layout(constant_id = 2) const uint MAX_COLS = 1u;
layout(constant_id = 3) const uint SUBGROUPS = 4u;  // subgroups per work group (sizes the reduction)
#ifdef SWIGLU
#define ROW_SETS 2u  // gate rows, then their up rows
#else
#define ROW_SETS 1u
#endif

layout(set = 0, binding = 0) readonly buffer W { uvec4 w4[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#ifdef PREQUANT
// Token t's group g (16 values) at t * x_stride / 16 + g: bytes, and (scale, sum as float bits).
layout(set = 0, binding = 1) readonly buffer XQ { uvec4 xq[]; };
layout(set = 0, binding = 3) readonly buffer XDS { vec2 xds[]; };
#ifdef NORM
layout(set = 0, binding = 4) readonly buffer R { float inv_rms_of[]; };  // per token
#endif
#else
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#ifdef NORM
layout(set = 0, binding = 3) readonly buffer N { vec4 norm4[]; };
#endif
#endif

layout(push_constant) uniform Push {
  uint rows;       // output rows (gate rows in SWIGLU)
  uint k;          // row length, a multiple of 256
  uint ntok;
  uint row_words;  // uvec4 words per weight row
  uint x_stride;   // floats between tokens in x (a multiple of 4)
  uint y_stride;   // floats between tokens in y
  uint y_row0;     // row offset of this dispatch in y
  uint w_offset;   // uvec4 word of row 0 in the weight binding
  uint up_row;     // SWIGLU: weight rows from a gate row to its up row
  uint tpr;        // threads per row lane: a power of two, a multiple of the subgroup size
  float eps;       // NORM
} pc;

#if defined(NORM) && !defined(PREQUANT)
#define SUM_OF_SQUARES
#endif
#include "q8_activations.glsl"
#include "matvec_q8_units.glsl"

shared float partial[SUBGROUPS * NUM_ROWS * ROW_SETS * MAX_COLS];
#if defined(NORM) && !defined(PREQUANT)
shared float partial_ss[SUBGROUPS * MAX_COLS];
#endif

void main() {
  // Threads are numbered subgroup by subgroup, so a lane (TPR consecutive threads) is whole subgroups.
  uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  uint lanes = gl_WorkGroupSize.x / pc.tpr;
  uint lane = tid / pc.tpr, lt = tid % pc.tpr;
  uint wg_rows = lanes * NUM_ROWS;
  uint wg_row0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * wg_rows;
  if (wg_row0 >= pc.rows) return;  // uniform: a padding group of the flattened grid
  uint tok0 = gl_WorkGroupID.z * MAX_COLS;
  uint ncols = min(MAX_COLS, pc.ntok - tok0);
  uint last_row = pc.rows - 1u, last_tok = pc.ntok - 1u;
  // This lane's rows: row0 + i * lanes (interleaved so the lanes of a group read neighbouring rows).
  uint row0 = wg_row0 + lane;

  precise float acc[NUM_ROWS * ROW_SETS][MAX_COLS];
  [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) acc[i][t] = 0.0;
  uint units = pc.k / 32u;
  for (uint u = lt; u < units; u += pc.tpr) {
    // Every row's unit is loaded first, so the loads are in flight together while x is prepared.
    WUnit wu[NUM_ROWS * ROW_SETS];
    [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i) {
      uint r = min(row0 + (i % NUM_ROWS) * lanes, last_row) + (i / NUM_ROWS) * pc.up_row;
      wu[i] = load_unit(pc.w_offset + r * pc.row_words, u);
    }
    // The x values of this unit for every token: two groups of 16, quantized.
    uint xa = unit_x_first(u);  // first x index of group A (group B is xa + unit_x_gap())
    XGroup gx[MAX_COLS][2];
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      uint tok = min(tok0 + t, last_tok);
      [[unroll]] for (uint g = 0u; g < 2u; ++g) {
#ifdef PREQUANT
        uint gi = tok * pc.x_stride / 16u + (xa + g * UNIT_X_GAP) / 16u;
        vec2 ds = xds[gi];
        gx[t][g] = XGroup(xq[gi], ds.x, floatBitsToInt(ds.y));
#else
        uint xo = tok * pc.x_stride / 4u, xi = (xa + g * UNIT_X_GAP) / 4u;
        vec4 v0 = x4[xo + xi], v1 = x4[xo + xi + 1u], v2 = x4[xo + xi + 2u], v3 = x4[xo + xi + 3u];
#ifdef NORM
        v0 *= norm4[xi];
        v1 *= norm4[xi + 1u];
        v2 *= norm4[xi + 2u];
        v3 *= norm4[xi + 3u];
#endif
        gx[t][g] = quantize16(v0, v1, v2, v3);
#endif
      }
    }
    [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
      [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) acc[i][t] += unit_dot(wu[i], gx[t][0], gx[t][1]);
  }

#if defined(NORM) && !defined(PREQUANT)
  // Every token's sum of squares, this thread's part (q8_activations.glsl), taken after the weights'
  // loads were issued.
  precise float ss[MAX_COLS];
  [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t)
    ss[t] = sum_of_squares(min(tok0 + t, last_tok) * pc.x_stride / 4u, pc.k / 4u, tid, gl_WorkGroupSize.x);
#endif

  // Reduction: subgroup sums, then the lane's subgroups in order. A lane is whole subgroups.
  uint sg = gl_SubgroupID;
  [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      float s = subgroupAdd(acc[i][t]);
      if (subgroupElect()) partial[(sg * NUM_ROWS * ROW_SETS + i) * MAX_COLS + t] = s;
    }
#if defined(NORM) && !defined(PREQUANT)
  [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
    float s = subgroupAdd(ss[t]);
    if (subgroupElect()) partial_ss[sg * MAX_COLS + t] = s;
  }
#endif
  barrier();
  uint lane_sgs = pc.tpr / gl_SubgroupSize;  // subgroups per lane
  for (uint o = tid; o < lanes * NUM_ROWS * MAX_COLS; o += gl_WorkGroupSize.x) {
    uint ln = o / (NUM_ROWS * MAX_COLS), i = (o / MAX_COLS) % NUM_ROWS, t = o % MAX_COLS;
    uint r = wg_row0 + ln + i * lanes;
    if (r >= pc.rows || t >= ncols) continue;
    precise float s = 0.0;
    for (uint j = 0u; j < lane_sgs; ++j) s += partial[((ln * lane_sgs + j) * NUM_ROWS * ROW_SETS + i) * MAX_COLS + t];
#ifdef SWIGLU
    precise float up = 0.0;
    for (uint j = 0u; j < lane_sgs; ++j)
      up += partial[((ln * lane_sgs + j) * NUM_ROWS * ROW_SETS + NUM_ROWS + i) * MAX_COLS + t];
#endif
#ifdef NORM
#ifdef PREQUANT
    float inv_rms = inv_rms_of[tok0 + t];
#else
    precise float sq = 0.0;
    for (uint j = 0u; j < gl_NumSubgroups; ++j) sq += partial_ss[j * MAX_COLS + t];
    float inv_rms = inversesqrt(sq / float(pc.k) + pc.eps);
#endif
    s *= inv_rms;
#ifdef SWIGLU
    up *= inv_rms;
#endif
#endif
#ifdef SWIGLU
    s = s / (1.0 + exp(-s)) * up;
#endif
    uint yo = (tok0 + t) * pc.y_stride + pc.y_row0 + r;
#ifdef ACCUMULATE
    y[yo] += s;
#else
    y[yo] = s;
#endif
  }
}
