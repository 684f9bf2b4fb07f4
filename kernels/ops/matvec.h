// Contract: matvec, the matrix-vector product of decode: y[t][r] = dot(W[r, :], x[t, :]) for a few tokens
// (any count; a work group reuses 4 weight rows for up to 8 tokens, 8 rows for one) and every weight type of
// base/tensor_type.h. W is in GGUF layout (row r at byte r * row_bytes(type, cols)), x and y are f32.
// Batch-invariant: a token's result is bit-identical whether it runs alone or in a batch of any size, on
// one device (this is also what matmul's Deterministic path dispatches). Weight matrices larger than one
// shader binding (maxStorageBufferRange) are split by rows into several dispatches.
// Records into a CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <cstdint>
#include <vector>

#include "base/tensor_type.h"
#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// A weight matrix: `rows` rows of `cols` values of `type` (cols a multiple of the type's block size).
struct WeightMatrix {
  vk::BufferView data;  // at least rows * row_bytes(type, cols) bytes
  TensorType type = TensorType::F32;
  uint32_t rows = 0;
  uint32_t cols = 0;
};

struct CoopmatTile;  // matmul.h

// Arguments shared by matvec and matmul: Y[t][r] = dot(W[r, :], X[t, :]) for t < tokens.
struct MatmulArgs {
  WeightMatrix w;
  vk::BufferView x;  // f32, token t at float t * x_stride, cols values each (matvec of block types:
                     // x_stride a multiple of 4)
  vk::BufferView y;  // f32, token t at float t * y_stride, rows values each
  uint32_t tokens = 1;
  uint32_t x_stride = 0;   // 0: w.cols
  uint32_t y_stride = 0;   // 0: w.rows
  vk::BufferView x_f16{};  // optional: x as f16 (same layout), which matmul's CoopMat2 path reads
  // Optional: where matmul's CoopMat path may keep split-K partial outputs (kernels/ops/matmul.h); k_splits
  // 0 lets it choose, 1 turns splitting off.
  vk::BufferView split_scratch{};
  uint32_t k_splits = 0;
  // Optional (tuning): the tile of the CoopMat build that reads x as f16, in place of kF16XTile.
  const CoopmatTile* f16x_tile = nullptr;
};

// The work-group size matvec uses on a device: 4 subgroups, 32..256 threads. Fixed per device, so its
// reduction order is fixed (spec constant 0 of matvec's registration rows, matvec.cpp).
uint32_t matvec_workgroup_size(const vk::Device& device);

// A block of consecutive weight rows bound as one view: rows [first_row, first_row + rows).
struct RowChunk {
  uint32_t first_row = 0;
  uint32_t rows = 0;
};
// Splits W into chunks of whole rows whose bytes, plus up to `alignment` bytes of slack in front (the
// binding is aligned down, see op_util.h) and rounding to words, fit `max_range`. One chunk when the whole
// matrix fits. Throws kvtrie::Error when a single row cannot be bound.
std::vector<RowChunk> split_rows(const WeightMatrix& w, uint64_t max_range, uint64_t alignment);

// Push constants of matvec/matmul shaders (the layout of their `Push` block).
struct MatmulPush {
  uint32_t rows, k, ntok, row_bytes, x_stride, y_stride, y_row0, w_offset;
};

// Shared by matvec and matmul: records one dispatch per row chunk of `pipeline` (a matvec/matmul shader
// with the MatmulPush block) over row groups of rows_per_group along x/y and token groups along z. A
// non-empty `extra` is bound as binding 3 (the SwiGLU build's up).
void dispatch_matmul_variant(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                             const vk::ComputePipeline& pipeline, uint32_t rows_per_group,
                             uint32_t tokens_per_group, vk::BufferView extra = {});

// Records y = W x for args.tokens tokens (batch-invariant, see above).
void matvec(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args);
// The fastest product for exactly one token (the decode step). For Q4_0 it sums in a different order than
// matvec(), so it is not bit-identical to a batched token: matmul's Deterministic path never uses it.
void matvec_single_token(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args);
// matvec_single_token of x = silu(args.x) * up (elementwise; `up` laid out like args.x): the FFN's SwiGLU
// folded into the down projection, one dispatch and one barrier fewer per layer.
void matvec_single_token_swiglu(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                                vk::BufferView up);

// The product of float weights (F32, F16, BF16) with its neighbours folded in, a dispatch and a barrier
// level each fewer: the norm before it, the FFN's SwiGLU after it, or the residual add. One token takes the
// single-token builds, more tokens the batched ones (8 a work group); a token gets the same bits alone and
// in any batch, as matvec() promises, so --deterministic may take them too. They do not equal the unfused
// steps bit for bit (the norm scales each token's sums, not x).
struct FusedMatvecArgs {
  WeightMatrix w;       // with swiglu: [gate; up], gate rows then as many up rows
  vk::BufferView x;     // f32: token t's w.cols values from t * x_stride
  vk::BufferView y;     // f32: token t's w.rows values (w.rows / 2 with swiglu) from t * y_stride
  vk::BufferView norm;  // set: the product is of rms_norm(x) * norm (w.cols f32 weights), eps its epsilon
  float eps = 0;
  bool swiglu = false;      // y[r] = silu(gate_r . x') * (up_r . x'), x' the normed x (needs norm)
  bool accumulate = false;  // y += W x (not with norm)
  uint32_t tokens = 1;
  uint32_t x_stride = 0, y_stride = 0;  // 0: w.cols, and the output rows
  // Batches with a norm: scratch for x times the norm's weights (tokens x w.cols floats) and each token's
  // sum of squares (tokens floats), computed first by norm_input.comp as the one-token build computes them.
  vk::BufferView normed_x, norm_sums;
};
// Whether matvec_fused takes w: a float type in one shader binding.
bool matvec_fused_supported(const vk::Device& device, const WeightMatrix& w);
void matvec_fused(vk::CommandRecorder& rec, const Kernels& k, const FusedMatvecArgs& args);

}  // namespace kvtrie::kernels
