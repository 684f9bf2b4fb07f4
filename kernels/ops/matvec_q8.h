// Contract: matvec_q8, the matrix-vector product of the decode step and of small batches on 8-bit-quantized
// activations (kernels/shaders/matvec_q8.comp): y[t][r] = dot(W[r, :], x[t, :]), x quantized ahead to bytes
// 16 values at a time (quantize_q8, or the SwiGLU product before, quantized_out) and multiplied by integer
// dot products. Weights in a device format or Q4_K/Q5_K (matvec_q8_supported), rows a multiple of 256
// values. x needs no work in the product, so it runs in small work groups that fill the device. It can fold
// in what surrounds a product in a transformer layer, each saving a dispatch and a barrier:
//   norm:          x was quantized from rms_norm(x) * weight; the product applies each token's 1 / rms;
//   accumulate:    y += W x (the residual add) instead of y = W x;
//   swiglu:        W is [gate; up] (2n rows) and y gets n rows of silu(gate x) * (up x) (with norm);
//   quantized_out: (with swiglu) y is also written quantized, as quantize_q8 would write it, for the next
//                  product; (with accumulate and out_norm) the new y, normed by out_norm, as quantize_q8
//                  with that norm would write it: the next normed product needs no quantize dispatch;
//   qkv_pages:     (with norm; the joined Q/K/V product) Q is stored rotated by normal-mode rope, and K
//                  rotated and V go as f16 into the KV pages, as kv_write_rope with Q's rope would leave
//                  them (kv_write.h), in the product's own dispatch.
// Against an f32 product the error is that of rounding x to 8 bits per 16 values (about 0.4% of the
// group's largest |x| per value); the integer sums themselves are exact.
// Batch-invariant: a token's result is bit-identical whether it runs alone or in a batch of any size
// (the per-token arithmetic and the reduction trees do not depend on the token count), so --deterministic
// decoding costs nothing here. Fast integer dot products are used where the device has them, the same
// integers computed portably elsewhere.
// Records into a CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "kernels/ops/kv_layout.h"
#include "kernels/ops/matvec.h"
#include "kernels/ops/quantized_x.h"
#include "kernels/ops/rope.h"

namespace kvtrie::kernels {

// Where the Q/K/V product's rows go besides y (MatvecQ8Args::qkv_pages): rows [0, q_rows) are Q, then
// layout.kv_dim rows of K and of V.
struct QkvToPages {
  uint32_t q_rows = 0;
  RopeArgs rope;  // normal mode: positions (a token each), freq_factors, head_dim, rope_dims, freq_base
  vk::BufferView slots;                   // int32 a token: page * P + slot in page, < 0: not stored
  std::array<vk::BufferView, 4> pools{};  // the page pool, pages_per_binding pages a binding (empty: unused)
  uint32_t pages_per_binding = 0;         // 0: the whole pool in pools[0]
  KvLayout layout;
  uint32_t layer = 0;
};

struct MatvecQ8Args {
  MatmulArgs product;  // W, y (y_stride), tokens; product.x is not read: the input is `x`
  QuantizedX x;
  bool norm = false;  // x holds rms_norm(x) * weight without the 1 / rms (from x.sum_squares)
  float norm_eps = 1e-5f;
  bool accumulate = false;
  bool swiglu = false;                      // requires norm (the FFN's gate/up product)
  std::optional<QuantizedX> quantized_out;  // with swiglu, or accumulate and out_norm: y quantized too
  vk::BufferView out_norm;                  // with accumulate: the next norm's weight (rows floats)
  std::optional<QkvToPages> qkv_pages;      // with norm: Q rotated, K and V into the pages
  // One token without a quantized output: rows a lane, kMatvecQ8Rows or kMatvecQ8RowsOne instead of
  // matvec_q8_shape's (0). A tuning knob (the logits' shape, GpuModelOptions::logits_rows_per_lane).
  uint32_t rows_per_lane = 0;
};

struct QuantizeQ8Args {
  vk::BufferView x;  // f32, token t at float t * x_stride
  uint32_t tokens = 0, cols = 0;
  uint32_t x_stride = 0;       // 0: cols (a multiple of 4)
  vk::BufferView norm_weight;  // non-empty: x rms-normed and scaled by these cols floats (and sum_squares)
  QuantizedX out;              // buffers of at least tokens * stride / 16 entries
};
// Records the quantization of `tokens` rows of x for later matvec_q8 products (cols a multiple of 16). With
// a norm, each token's 1 / rms is written apart and the bytes hold x * weight.
void quantize_q8(vk::CommandRecorder& rec, const Kernels& k, const QuantizeQ8Args& args);

// Whether this device runs the GL_EXT_integer_dot_product build (where the device and the build have it),
// else the portable one (the same integers, several instructions each).
bool matvec_q8_uses_int_dot(const vk::Device& device);

// Whether matvec_q8 takes weights of this type and row length.
bool matvec_q8_supported(TensorType type, uint64_t cols);

void matvec_q8(vk::CommandRecorder& rec, const Kernels& k, const MatvecQ8Args& args);

// The launch shape matvec_q8 uses on a device for a matrix of `rows` rows of device format `type` (exposed
// for the tuning harness). A row lane is one subgroup, two for the residual products (accumulate) where 16
// such lanes fit a work group, whatever the token count, so a row's reduction order never depends on the
// batch (two subgroups a row: the 8B's down projection 14.6 against 16.6 us for Q4_0, 18.1 against 19.1 for
// Q4_K, 20.7 against 21.4 for Q8_0, and o 7.9 against 8.3 for Q4_0, sweep-matvec on an H200, session 28);
// the rows per lane follow sweep-matvec on an H100 (llama3-8b shapes, docs/BENCHMARKS.md, session 21):
// - one token: a row a lane, except kMatvecQ8Rows for SwiGLU and, for Q4_0 and the K-quants whose units
//   decode their scales (Q4_K, Q5_K), for matrices of 16384 rows and more (the logits. H100, session 21,
//   output in device memory: Q4_0 104 against 115 us, Q6_K 158 against 171, Q4_K 129 against 119. H200,
//   session 31, in the 8B step, output in host memory: Q4_0 80.9 against 89.1 us, Q4_K 91.1 against
//   112.1, Q8_0 145.4 against 133.9; the 8B Q4_0 and 1B Q4_0 steps 0.6% and 1.1% faster, the greedy
//   step's too);
// - one token with a quantized output (whole groups of 16 outputs a work group): 16 lanes of one row where
//   the device allows, for the residual products and Q4_0's and Q8_0's SwiGLU (whose units decode in few
//   instructions: 8B Q4_0 gate/up 1.05 against 1.14 ms a step with 4 lanes of 4 rows, session 21; 8B Q8_0
//   48.3 against 51.3 us a product, session 27; Q4_K's took 1.29 against 1.17); else 4 lanes of
//   kMatvecQ8Rows;
// - batches: kMatvecQ8RowsPair, kMatvecQ8RowsOne for SwiGLU (H200: gate/up 91 us against 140 with 4 rows at
//   8 tokens, down 110 against 156 at 16), kMatvecQ8Rows with a quantized output (the residual product's
//   lanes of two subgroups: 8 lanes of kMatvecQ8RowsPair).
struct MatvecQ8Shape {
  uint32_t workgroup = 0;
  uint32_t threads_per_row = 0;
  uint32_t rows_per_lane = 0;
  bool lanes16 = false;  // 16 lanes of one row (the registered t1l16 build)
  bool wide = false;     // the residual products' lanes of two subgroups in work groups of their own size
};
MatvecQ8Shape matvec_q8_shape(const vk::Device& device, TensorType type, uint64_t rows,
                              uint32_t tokens_per_group, bool swiglu = false, bool quantized_out = false,
                              bool accumulate = false);
// The rows per lane of the registered builds.
inline constexpr uint32_t kMatvecQ8Rows = 4, kMatvecQ8RowsPair = 2, kMatvecQ8RowsOne = 1;

// Records one dispatch of a matvec_q8 pipeline built with the given specialization constants
// {workgroup, rows_per_lane, tokens_per_group, subgroups} (the tuning harness; matvec_q8() calls it with its
// own).
void dispatch_matvec_q8(vk::CommandRecorder& rec, const Kernels& k, const MatvecQ8Args& args,
                        const vk::ComputePipeline& pipeline, const MatvecQ8Shape& shape,
                        uint32_t tokens_per_group);

}  // namespace kvtrie::kernels
