#version 450
// matvec_q8_<mode>_<type>: y[t][r] = dot(W[r, :], x[t, :]) on 8-bit-quantized activations, for the decode
// step and small batches. x comes quantized by quantize_q8.comp (or by the product before, QUANT_OUT): 16
// values at a time as bytes q with a scale d = max|x| / 127 and their sum. Each weight unit of 32 values is
// multiplied by integer dot products of packed bytes (GL_EXT_integer_dot_product where the device has it
// (INT_DOT), the same integers otherwise), then scaled in float: per instruction several times the work of
// decoding every weight to a float, so the product streams weights near the memory bandwidth.
//
// Work: thread t of a row lane takes the weight units u = t, t + TPR, ... of the row (TPR threads per lane,
// `tpr`); a work group holds WG / TPR lanes of NUM_ROWS rows each (rows wg_row0 + lane + i * lanes, so a
// work group's rows are contiguous). x needs no work here, so work groups can be small and many.
// Modes (defines): NORM: x was quantized from rms_norm(x) * norm_weight without the 1 / rms, which is applied
// here, computed from the groups' sums of squares that came with x; ACCUMULATE: y += W x (a residual add);
// SWIGLU: the work group also computes the up row `up_row` rows below each gate row and writes
// silu(gate) * up; QUANT_OUT (with SWIGLU, or ACCUMULATE and NORM_OUT): the outputs are also written
// quantized for the next product (the down projection; after a residual add, the next normed product), each
// work group's 16 outputs a token one group, quantized as quantize_q8.comp would quantize them; NORM_OUT:
// what is quantized is the new y times out_norm (the next norm's weight), with each group's sum of squares
// of y, as quantize_q8_norm writes them, so the next product needs no quantize dispatch; QKV_PAGES (the joined Q/K/V
// product): Q is stored rotated by normal-mode rope, and K (rotated) and V go as f16 into the KV pages at
// each token's slot, as kv_write.comp's QKV build would store them (rope.glsl, kv_layout.h), so the decode
// step needs no dispatch of its own for them. A work group's rows come in pairs (its row count is even).
// Batch invariance: a token's result is built by the same operations in the same order whatever MAX_COLS
// and the token count (the unit split depends only on the row length and TPR, the reductions are fixed
// trees), so one token alone and in any batch get bit-identical results.
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
// Token t's group g (16 values) at t * x_stride / 16 + g: bytes, and (scale, sum as float bits).
layout(set = 0, binding = 1) readonly buffer XQ { uvec4 xq[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
layout(set = 0, binding = 3) readonly buffer XDS { vec2 xds[]; };
#ifdef NORM
layout(set = 0, binding = 4) readonly buffer SS { float sum_sq[]; };  // as XDS: a float a group of 16
#endif
#ifdef NORM_OUT
layout(set = 0, binding = 4) readonly buffer ON { float out_norm[]; };  // the next norm's weight, y_row0 + r
layout(set = 0, binding = 7) writeonly buffer OSS { float out_sum_sq[]; };  // as ODS
#endif
#ifdef QUANT_OUT
layout(set = 0, binding = 5) writeonly buffer OQ { uvec4 out_q[]; };  // as XQ, out_stride values a token
layout(set = 0, binding = 6) writeonly buffer ODS { vec2 out_ds[]; };
#endif
#ifdef QKV_PAGES
layout(set = 0, binding = 5) readonly buffer Slots { int slots[]; };  // page * P + slot in page; < 0: skip
layout(set = 0, binding = 6) readonly buffer Pos { int positions[]; };
layout(set = 0, binding = 7) readonly buffer Factors { float factors[]; };
// The page pool in up to four bindings of pages_per_binding pages (unused ones repeat the first).
layout(set = 0, binding = 8) writeonly buffer Pages0 { uint pages0[]; };
layout(set = 0, binding = 9) writeonly buffer Pages1 { uint pages1[]; };
layout(set = 0, binding = 10) writeonly buffer Pages2 { uint pages2[]; };
layout(set = 0, binding = 11) writeonly buffer Pages3 { uint pages3[]; };
#endif

layout(push_constant) uniform Push {
  uint rows;        // output rows (gate rows in SWIGLU)
  uint k;           // row length, a multiple of 256
  uint ntok;
  uint row_words;   // uvec4 words per weight row
  uint x_stride;    // values between tokens in x (a multiple of 16)
  uint y_stride;    // floats between tokens in y
  uint y_row0;      // row offset of this dispatch in y
  uint w_offset;    // uvec4 word of row 0 in the weight binding
  uint up_row;      // SWIGLU: weight rows from a gate row to its up row
  uint tpr;         // threads per row lane: a power of two, a multiple of the subgroup size
  uint out_stride;  // QUANT_OUT: values between tokens in the quantized output (a multiple of 16)
  float eps;        // NORM: the norm's epsilon
#ifdef QKV_PAGES
  uint q_rows;  // Q's rows; K's and V's kv_dim rows each follow
  uint kv_dim;
  uint head_dim;
  uint rope_dims;  // even, <= head_dim
  uint has_factors;
  float freq_base;
  uint page_tokens;  // P
  uint n_layers;
  uint layer;
  uint pages_per_binding;
#endif
} pc;

#include "q8_activations.glsl"
#include "matvec_q8_units.glsl"

shared float partial[SUBGROUPS * NUM_ROWS * ROW_SETS * MAX_COLS];
#ifdef NORM
shared float inv_rms_of[MAX_COLS];
#endif
#if defined(QUANT_OUT) || defined(QKV_PAGES)
shared float outputs[SUBGROUPS * NUM_ROWS * MAX_COLS];  // token t's output row r at t * wg_rows + r - wg_row0
#endif
// The epilogue's inputs from memory, read in the first round (stage_inputs): y to add onto (ACCUMULATE), as
// outputs, and the next norm's weight of the work group's rows (NORM_OUT).
#ifdef ACCUMULATE
shared float y_in[SUBGROUPS * NUM_ROWS * MAX_COLS];
#endif
#ifdef NORM_OUT
shared float out_norm_in[SUBGROUPS * NUM_ROWS];
#endif
#ifdef QKV_PAGES
#include "kv_layout.glsl"
#include "rope.glsl"
void store_page_word(uint binding, uint word, uint value) {
  if (binding == 0u)
    pages0[word] = value;
  else if (binding == 1u)
    pages1[word] = value;
  else if (binding == 2u)
    pages2[word] = value;
  else
    pages3[word] = value;
}
#endif

// Reads the epilogue's inputs into shared memory. Called in a thread's first round after its weight loads
// are issued, so their latency hides behind the weights' rather than adding a round trip to the end of
// every work group (the work groups of a decode product are about one wave: each one's end is the
// product's); threads without a unit call it after the loop.
void stage_inputs(uint tid, uint wg_row0, uint wg_rows, uint tok0, uint ncols) {
#ifdef ACCUMULATE
  for (uint o = tid; o < wg_rows * MAX_COLS; o += gl_WorkGroupSize.x) {
    uint t = o / wg_rows, r = wg_row0 + o % wg_rows;
    if (r < pc.rows && t < ncols) y_in[o] = y[(tok0 + t) * pc.y_stride + pc.y_row0 + r];
  }
#endif
#ifdef NORM_OUT
  for (uint o = tid; o < wg_rows; o += gl_WorkGroupSize.x)
    if (wg_row0 + o < pc.rows) out_norm_in[o] = out_norm[pc.y_row0 + wg_row0 + o];
#endif
}

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
#ifdef NORM
  // Each token's 1 / rms from its k / 16 group sums of squares, by the first subgroup in one fixed order
  // (thread i sums groups i, i + subgroup size, ... in turn, then subgroupAdd), whatever the work group's
  // shape, so a token gets the same bits alone and in any batch. The loads go out 8 at a time before they
  // are summed in that order (a row of 4,096 in one round trip, whatever the compiler makes of a loop).
  // Read after the reduction's barrier.
  if (gl_SubgroupID == 0u) {
    uint groups = pc.k / 16u;
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      uint base = min(tok0 + t, last_tok) * pc.x_stride / 16u;
      precise float ss = 0.0;
      for (uint g0 = gl_SubgroupInvocationID; g0 < groups; g0 += 8u * gl_SubgroupSize) {
        float v[8];
        [[unroll]] for (uint j = 0u; j < 8u; ++j) {
          uint g = g0 + j * gl_SubgroupSize;
          v[j] = g < groups ? sum_sq[base + g] : 0.0;
        }
        [[unroll]] for (uint j = 0u; j < 8u; ++j) ss += v[j];  // + 0.0 past the end: the same sum
      }
      float total = subgroupAdd(ss);
      if (subgroupElect()) inv_rms_of[t] = inversesqrt(total / float(pc.k) + pc.eps);
    }
  }
#endif

  precise float acc[NUM_ROWS * ROW_SETS][MAX_COLS];
  [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) acc[i][t] = 0.0;
  uint units = pc.k / 32u;
#ifdef PROBE_NO_X
  if (units == 0u) y[0] = float(xq[0].x) + xds[0].x;  // never: keeps x's bindings in the shader
#endif
  for (uint u = lt; u < units; u += pc.tpr) {
    // Every row's unit is loaded first, so the loads are in flight together.
    WUnit wu[NUM_ROWS * ROW_SETS];
    [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i) {
      uint r = min(row0 + (i % NUM_ROWS) * lanes, last_row) + (i / NUM_ROWS) * pc.up_row;
      wu[i] = load_unit(pc.w_offset + r * pc.row_words, u);
    }
    // The x values of this unit for every token: two groups of 16.
    uint xa = unit_x_first(u);  // first x index of group A (group B is xa + UNIT_X_GAP)
    UnitX ux[MAX_COLS];
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      uint tok = min(tok0 + t, last_tok);
      XGroup gx[2];
      [[unroll]] for (uint g = 0u; g < 2u; ++g) {
        uint gi = tok * pc.x_stride / 16u + (xa + g * UNIT_X_GAP) / 16u;
#ifdef PROBE_NO_X  // tuning builds only (bench/): x made up from its index instead of loaded
        gx[g] = XGroup(uvec4(gi * 0x01010101u, gi, gi + 1u, gi ^ 7u), float(gi), int(gi & 0xFFu));
#else
        vec2 ds = xds[gi];
        gx[g] = XGroup(xq[gi], ds.x, floatBitsToInt(ds.y));
#endif
      }
      ux[t] = unit_x(gx[0], gx[1]);
    }
    if (u == lt) stage_inputs(tid, wg_row0, wg_rows, tok0, ncols);
    [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
      [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
#ifdef PROBE_NO_DOT  // tuning builds only (bench/): the loads (quants and scales) without the arithmetic
        acc[i][t] += float((wu[i].a.x ^ wu[i].b.w ^ floatBitsToUint(wu[i].f.x) ^ ux[t].qa.x ^ ux[t].qb.w) & 0xFFu);
#else
        acc[i][t] += unit_dot(wu[i], ux[t]);
#endif
      }
  }

  if (lt >= units) stage_inputs(tid, wg_row0, wg_rows, tok0, ncols);

  // Reduction: subgroup sums, then the lane's subgroups in order. A lane is whole subgroups.
  uint sg = gl_SubgroupID;
  [[unroll]] for (uint i = 0u; i < NUM_ROWS * ROW_SETS; ++i)
    [[unroll]] for (uint t = 0u; t < MAX_COLS; ++t) {
      float s = subgroupAdd(acc[i][t]);
      if (subgroupElect()) partial[(sg * NUM_ROWS * ROW_SETS + i) * MAX_COLS + t] = s;
    }
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
    float inv_rms = inv_rms_of[t];
    s *= inv_rms;
#ifdef SWIGLU
    up *= inv_rms;
#endif
#endif
#ifdef SWIGLU
    s = s / (1.0 + exp(-s)) * up;
#endif
#ifndef QKV_PAGES
    uint yo = (tok0 + t) * pc.y_stride + pc.y_row0 + r;
#ifdef ACCUMULATE
    s += y_in[t * wg_rows + r - wg_row0];
#endif
    y[yo] = s;
#endif
#if defined(QUANT_OUT) || defined(QKV_PAGES)
    outputs[t * wg_rows + r - wg_row0] = s;
#endif
  }
#ifdef QUANT_OUT
  // Each token's outputs of this work group, 16 at a time, quantized from the very floats stored in y.
  barrier();
  uint groups = wg_rows / 16u;
  for (uint o = tid; o < groups * MAX_COLS; o += gl_WorkGroupSize.x) {
    uint t = o / groups, g = o % groups;
    uint r = wg_row0 + 16u * g;
    if (r >= pc.rows || t >= ncols) continue;
    uint b = t * wg_rows + 16u * g;
    vec4 v0 = vec4(outputs[b], outputs[b + 1u], outputs[b + 2u], outputs[b + 3u]);
    vec4 v1 = vec4(outputs[b + 4u], outputs[b + 5u], outputs[b + 6u], outputs[b + 7u]);
    vec4 v2 = vec4(outputs[b + 8u], outputs[b + 9u], outputs[b + 10u], outputs[b + 11u]);
    vec4 v3 = vec4(outputs[b + 12u], outputs[b + 13u], outputs[b + 14u], outputs[b + 15u]);
    uint oi = (tok0 + t) * pc.out_stride / 16u + (pc.y_row0 + r) / 16u;
#ifdef NORM_OUT
    out_sum_sq[oi] = sum_squares16(v0, v1, v2, v3);
    uint n = 16u * g;
    v0 *= vec4(out_norm_in[n], out_norm_in[n + 1u], out_norm_in[n + 2u], out_norm_in[n + 3u]);
    v1 *= vec4(out_norm_in[n + 4u], out_norm_in[n + 5u], out_norm_in[n + 6u], out_norm_in[n + 7u]);
    v2 *= vec4(out_norm_in[n + 8u], out_norm_in[n + 9u], out_norm_in[n + 10u], out_norm_in[n + 11u]);
    v3 *= vec4(out_norm_in[n + 12u], out_norm_in[n + 13u], out_norm_in[n + 14u], out_norm_in[n + 15u]);
#endif
    XGroup q = quantize16(v0, v1, v2, v3);
    out_q[oi] = q.q;
    out_ds[oi] = vec2(q.d, intBitsToFloat(q.s));
  }
#endif
#ifdef QKV_PAGES
  // Each pair of rows (2i, 2i + 1 of a head: rope's pairs) of each token: Q rotated into y; K rotated and V
  // into the pages (y keeps them unrotated, as kv_write leaves them).
  barrier();
  uint pairs = wg_rows / 2u;
  for (uint o = tid; o < pairs * MAX_COLS; o += gl_WorkGroupSize.x) {
    uint t = o / pairs, p = o % pairs;
    uint r = wg_row0 + 2u * p;
    if (r >= pc.rows || t >= ncols) continue;
    uint tok = tok0 + t;
    vec2 v = vec2(outputs[t * wg_rows + 2u * p], outputs[t * wg_rows + 2u * p + 1u]);
    bool is_q = r < pc.q_rows, is_k = !is_q && r < pc.q_rows + pc.kv_dim;
    uint c = is_q ? r : (is_k ? r - pc.q_rows : r - pc.q_rows - pc.kv_dim);  // column in Q, K or V
    uint i = (c % pc.head_dim) / 2u;  // the pair's index inside its head
    vec2 rotated = v;
    if ((is_q || is_k) && 2u * i < pc.rope_dims)
      rotated = rope_rotate(v, i, pc.rope_dims, pc.freq_base, pc.has_factors != 0u ? factors[i] : 1.0,
                            positions[tok]);
    uint yo = tok * pc.y_stride + pc.y_row0 + r;
    vec2 stored = is_q ? rotated : v;
    y[yo] = stored.x;
    y[yo + 1u] = stored.y;
    int slot = slots[tok];
    if (is_q || slot < 0) continue;
    uint page = uint(slot) / pc.page_tokens, in_page = uint(slot) % pc.page_tokens;
    uint element = kv_element(page % pc.pages_per_binding, pc.layer, is_k ? 0u : 1u, in_page, c, pc.n_layers,
                              pc.page_tokens, pc.kv_dim);
    store_page_word(page / pc.pages_per_binding, element / 2u, packHalf2x16(is_k ? rotated : v));
  }
#endif
}
