// Contract: matvec, the matrix-vector product of decode: y[t][r] = dot(W[r, :], x[t, :]) for a few tokens
// (any count; each work group reuses one weight row for up to 8 tokens) and every weight type of
// kernels/tensor_type.h. W is in GGUF layout (row r at byte r * row_bytes(type, cols)), x and y are f32.
// Batch-invariant: a token's result is bit-identical whether it runs alone or in a batch of any size, on
// one device (this is also what matmul's Deterministic path dispatches). Weight matrices larger than one
// shader binding (maxStorageBufferRange) are split by rows into several dispatches.
// Records into a CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor_type.h"
#include "kernels/vk/buffer.h"

namespace kvtrie::vk {
class CommandRecorder;
class Context;
}  // namespace kvtrie::vk

namespace kvtrie::ops {

// A weight matrix: `rows` rows of `cols` values of `type` (cols a multiple of the type's block size).
struct WeightMatrix {
  vk::BufferView data;  // at least rows * row_bytes(type, cols) bytes
  TensorType type = TensorType::F32;
  uint32_t rows = 0;
  uint32_t cols = 0;
};

// Arguments shared by matvec and matmul: Y[t][r] = dot(W[r, :], X[t, :]) for t < tokens.
struct MatmulArgs {
  WeightMatrix w;
  vk::BufferView x;       // f32, token t at float t * x_stride, cols values each
  vk::BufferView y;       // f32, token t at float t * y_stride, rows values each
  uint32_t tokens = 1;
  uint32_t x_stride = 0;  // 0: w.cols
  uint32_t y_stride = 0;  // 0: w.rows
};

// Shader variant suffix of a type ("q4_k", "bf16", ...).
std::string type_variant_suffix(TensorType type);

// The work-group size matvec uses on this device (fixed per device, so its reduction order is fixed).
uint32_t matvec_workgroup_size(const vk::Context& context);

// A block of consecutive weight rows bound as one view: rows [first_row, first_row + rows).
struct RowChunk {
  uint32_t first_row = 0;
  uint32_t rows = 0;
};
// Splits W into chunks whose bytes fit `max_range` and start at multiples of `alignment` (a power of two).
// One chunk when the whole matrix fits. Throws kvtrie::Error when a single row cannot be bound.
std::vector<RowChunk> split_rows(const WeightMatrix& w, uint64_t max_range, uint64_t alignment);

// Push constants of matvec/matmul shaders (the layout of their `Push` block).
struct MatmulPush {
  uint32_t rows, k, ntok, row_bytes, x_stride, y_stride, y_row0;
};

// Records y = W x for args.tokens tokens.
void matvec(vk::CommandRecorder& recorder, const MatmulArgs& args);

}  // namespace kvtrie::ops
