// Contract: argmax_rows writes, for each of `rows` rows of n f32 values in `values` (row-major), the index
// of its largest value as a uint32 into `out`: NaN read as -inf, ties (and a row of nothing but -inf and NaN)
// to the lowest index, so it picks what Sampler's greedy picks from the same row. A decode step's greedy
// token without reading the row back (argmax_rows.comp: chunks of a row in parallel, then a merge a row;
// `scratch` holds the chunks' bests, argmax_rows_scratch_bytes of it). Records into a CommandRecorder from
// the thread that owns the Context; the views must outlive the recording's execution. Throws kvtrie::Error
// on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

uint64_t argmax_rows_scratch_bytes(uint32_t rows, uint32_t n);

void argmax_rows(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView values, uint32_t rows, uint32_t n,
                 vk::BufferView out, vk::BufferView scratch);

}  // namespace kvtrie::kernels
