// Contract: top_k_rows writes, for each of `rows` rows of n f32 values in `values` (row-major), the row's k
// best entries in rank order: the larger value first, the lower index among equal ones, NaN read as -inf.
// Row r's i-th best goes to out_index[r * k + i] (uint32) and out_value[r * k + i] (f32). The first j <= k
// of them are exactly what Sampler's top-j keeps of the same row, in its order, so a step's sampled rows
// need not be read back whole (0.5 MB a row for a 128K vocabulary). k <= kTopKRowsMax and k <= n. Two
// passes (top_k_rows.comp: chunks of a row sorted in parallel, then a merge a row; `scratch` holds the
// chunks' best, top_k_rows_scratch_bytes of it). Records into a CommandRecorder from the thread that owns
// the Context; the views must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

inline constexpr uint32_t kTopKRowsMax = 256;

uint64_t top_k_rows_scratch_bytes(uint32_t rows, uint32_t n, uint32_t k);

void top_k_rows(vk::CommandRecorder& rec, const Kernels& kernels, vk::BufferView values, uint32_t rows,
                uint32_t n, uint32_t k, vk::BufferView out_index, vk::BufferView out_value,
                vk::BufferView scratch);

}  // namespace kvtrie::kernels
