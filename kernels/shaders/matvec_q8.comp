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
// also computes the up row `up_row` rows below each gate row and writes silu(gate) * up.
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
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#ifdef NORM
layout(set = 0, binding = 3) readonly buffer N { vec4 norm4[]; };
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

#include "matvec_q8_units.glsl"

shared float partial[SUBGROUPS * NUM_ROWS * ROW_SETS * MAX_COLS];
#ifdef NORM
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
#ifdef NORM
  precise float ss[MAX_COLS];
  [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) ss[t] = 0.0;
#endif

  uint units = pc.k / 32u;
  for (uint u = lt; u < units; u += pc.tpr) {
    // The x values of this unit for every token: two groups of 16, quantized.
    uint xa = unit_x_first(u);  // first x index of group A (group B is xa + unit_x_gap())
    XGroup gx[MAX_COLS][2];
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      uint xo = (min(tok0 + t, last_tok) * pc.x_stride) / 4u;
      [[unroll]] for (uint g = 0u; g < 2u; ++g) {
        uint xi = (xa + g * UNIT_X_GAP) / 4u;
        vec4 v0 = x4[xo + xi], v1 = x4[xo + xi + 1u], v2 = x4[xo + xi + 2u], v3 = x4[xo + xi + 3u];
#ifdef NORM
        ss[t] = fma(v0.x, v0.x, ss[t]);  // the sum of squares in a fixed order: see the norm below
        ss[t] = fma(v0.y, v0.y, ss[t]);
        ss[t] = fma(v0.z, v0.z, ss[t]);
        ss[t] = fma(v0.w, v0.w, ss[t]);
        ss[t] = fma(v1.x, v1.x, ss[t]);
        ss[t] = fma(v1.y, v1.y, ss[t]);
        ss[t] = fma(v1.z, v1.z, ss[t]);
        ss[t] = fma(v1.w, v1.w, ss[t]);
        ss[t] = fma(v2.x, v2.x, ss[t]);
        ss[t] = fma(v2.y, v2.y, ss[t]);
        ss[t] = fma(v2.z, v2.z, ss[t]);
        ss[t] = fma(v2.w, v2.w, ss[t]);
        ss[t] = fma(v3.x, v3.x, ss[t]);
        ss[t] = fma(v3.y, v3.y, ss[t]);
        ss[t] = fma(v3.z, v3.z, ss[t]);
        ss[t] = fma(v3.w, v3.w, ss[t]);
        v0 *= norm4[xi];
        v1 *= norm4[xi + 1u];
        v2 *= norm4[xi + 2u];
        v3 *= norm4[xi + 3u];
#endif
        gx[t][g] = quantize16(v0, v1, v2, v3);
      }
    }
    // Every row's unit is loaded before any is used, so the loads are in flight together.
    WUnit wu[NUM_ROWS * ROW_SETS];
    [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i) {
      uint r = min(row0 + (i % NUM_ROWS) * lanes, last_row) + (i / NUM_ROWS) * pc.up_row;
      wu[i] = load_unit(pc.w_offset + r * pc.row_words, u);
    }
    [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
      [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) acc[i][t] += unit_dot(wu[i], gx[t][0], gx[t][1]);
  }

  // Reduction: subgroup sums, then the lane's subgroups in order. A lane is whole subgroups.
  uint sg = gl_SubgroupID;
  [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      float s = subgroupAdd(acc[i][t]);
      if (subgroupElect()) partial[(sg * NUM_ROWS * ROW_SETS + i) * MAX_COLS + t] = s;
    }
#ifdef NORM
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
    // Every lane saw the whole row of x: its first lane's sum is the row's sum of squares.
    precise float sq = 0.0;
    for (uint j = 0u; j < lane_sgs; ++j) sq += partial_ss[j * MAX_COLS + t];
    float inv_rms = inversesqrt(sq / float(pc.k) + pc.eps);
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
