// Contract: get_rows, the embedding lookup: rows of a table of any tensor type, decoded to f32
// (get_rows.comp).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>
#include <optional>

#include "base/tensor_type.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/quantized_x.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// Embedding lookup: out[t] = dequant(row ids[t]) of a table of `type` with n values per row. The table may
// be given as several chunks of whole rows (a table larger than a binding): call once per chunk with
// row_begin = the chunk's first row and row_count its rows; tokens outside the chunk are left untouched.
// With quantized_out (n a multiple of 16), each row is also written times norm_weight and quantized, with
// its groups' sums of squares, as quantize_q8 with that norm would write it (the same bits): the next
// norm's input for matvec_q8 in the same pass.
struct GetRowsArgs {
  vk::BufferView table;  // any byte offset; rows are row_bytes(type, n) apart
  TensorType type = TensorType::F32;
  uint32_t n = 0;
  uint32_t row_begin = 0, row_count = 0;
  vk::BufferView ids;  // int32 per token
  vk::BufferView out;  // f32, out_stride floats per token (0: n)
  uint32_t n_tokens = 0;
  uint32_t out_stride = 0;
  std::optional<QuantizedX> quantized_out;  // with sum_squares
  vk::BufferView norm_weight;               // n floats, with quantized_out
};
void get_rows(vk::CommandRecorder& rec, const Kernels& k, const GetRowsArgs& a);

}  // namespace kvtrie::kernels
