// Contract: matvec_q8, the matrix-vector product of the decode step and of small batches on 8-bit-quantized
// activations (kernels/shaders/matvec_q8.comp): y[t][r] = dot(W[r, :], x[t, :]), with x quantized to bytes
// 16 values at a time and multiplied by integer dot products. Weights in a device format or Q4_K/Q5_K
// (matvec_q8_supported), rows a multiple of 256 values. It can fold in what surrounds a product in a
// transformer layer, each saving a dispatch and a barrier:
//   norm_weight: the product reads rms_norm(x) * norm_weight, the norm computed in the same dispatch;
//   accumulate:  y += W x (the residual add) instead of y = W x;
//   swiglu:      W is [gate; up] (2n rows) and y gets n rows of silu(gate x) * (up x) (with norm_weight).
// Batches quantize x once ahead (quantize_q8, MatvecQ8Args::quantized) rather than in every work group.
// Against an f32 product the error is that of rounding x to 8 bits per 16 values (about 0.4% of the
// group's largest |x| per value); the integer sums themselves are exact.
// Batch-invariant: a token's result is bit-identical whether it runs alone or in a batch of any size
// (the per-token arithmetic and the reduction trees do not depend on the token count), so --deterministic
// decoding costs nothing here. Fast integer dot products are used where the device has them, the same
// integers computed portably elsewhere.
// Records into a CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <cstdint>
#include <optional>

#include "kernels/ops/matvec.h"

namespace kvtrie::kernels {

// x quantized ahead of a batch's products by quantize_q8(): views of what it writes. A batch quantizes
// each input once instead of once in every work group of every product.
struct QuantizedX {
  vk::BufferView bytes;    // 16 bytes per 16 values, token t at value t * stride
  vk::BufferView scales;   // (scale, sum) per 16 values, likewise
  vk::BufferView inv_rms;  // a float per token: 1 / rms of the normed input (with a norm)
  uint32_t stride = 0;     // values between tokens (a multiple of 16)
};

struct MatvecQ8Args {
  MatmulArgs product;          // W, x (x_stride a multiple of 4; ignored with `quantized`), y, tokens
  vk::BufferView norm_weight;  // non-empty: x is rms-normed and scaled by these w.cols floats first
  float norm_eps = 1e-5f;
  bool accumulate = false;
  bool swiglu = false;  // requires norm_weight (the FFN's gate/up product)
  // Set: x comes from quantize_q8() (with the norm applied there; norm_weight then only says to scale by
  // its inv_rms). Bit-identical to quantizing in the product.
  std::optional<QuantizedX> quantized;
};

struct QuantizeQ8Args {
  vk::BufferView x;  // f32, token t at float t * x_stride
  uint32_t tokens = 0, cols = 0;
  uint32_t x_stride = 0;       // 0: cols (a multiple of 4)
  vk::BufferView norm_weight;  // non-empty: x rms-normed and scaled by these cols floats (writes inv_rms)
  float norm_eps = 1e-5f;
  QuantizedX out;  // buffers of at least tokens * stride / 16 entries (and `tokens` floats of inv_rms)
};
// Records the quantization of `tokens` rows of x for later matvec_q8 products (cols a multiple of 16).
void quantize_q8(vk::CommandRecorder& rec, const Kernels& k, const QuantizeQ8Args& args);

// Whether this device runs the GL_EXT_integer_dot_product build (where the device and the build have it),
// else the portable one (the same integers, several instructions each).
bool matvec_q8_uses_int_dot(const vk::Device& device);

// Whether matvec_q8 takes weights of this type and row length.
bool matvec_q8_supported(TensorType type, uint64_t cols);

void matvec_q8(vk::CommandRecorder& rec, const Kernels& k, const MatvecQ8Args& args);

// The launch shape matvec_q8 uses on a device for a matrix of `rows` rows (exposed for the tuning harness):
// threads per row lane (one subgroup, for every matrix and token count, so a row's reduction order never
// depends on the batch) and rows per lane (kMatvecQ8RowsOne for one token of a matrix below 16384 rows,
// else kMatvecQ8Rows).
struct MatvecQ8Shape {
  uint32_t workgroup = 0;
  uint32_t threads_per_row = 0;
  uint32_t rows_per_lane = 0;
};
MatvecQ8Shape matvec_q8_shape(const vk::Device& device, uint64_t rows, uint32_t tokens_per_group);
// The rows per lane of the registered builds: the batched build's and the single-token builds'.
inline constexpr uint32_t kMatvecQ8Rows = 4, kMatvecQ8RowsOne = 1;

// Records one dispatch of a matvec_q8 pipeline built with the given specialization constants
// {workgroup, rows_per_lane, tokens_per_group} (the tuning harness; matvec_q8() calls it with its own).
void dispatch_matvec_q8(vk::CommandRecorder& rec, const Kernels& k, const MatvecQ8Args& args,
                        const vk::ComputePipeline& pipeline, const MatvecQ8Shape& shape,
                        uint32_t tokens_per_group);

}  // namespace kvtrie::kernels
