// Contract: the device formats of weight matrices. Q4_0, Q8_0 and Q6_K blocks (18, 34 and 210 bytes) are
// only 2-byte aligned in files, so a shader would assemble every 16 bytes of quants from several loads and
// shifts. On the device, every group of 8 blocks (Q6_K: superblocks) of a row is regrouped as the 8 blocks'
// quants (Q6_K: quants and scales) followed by their 8 f16 scales: the same bytes, in a group that starts
// 16-byte aligned, so shaders load quants 16 bytes at a time (base/tensor_type.h names these formats
// Q4_0x8, Q8_0x8, Q6_Kx8; kernels/shaders/matvec_blocks.glsl and matvec_q8_units.glsl read them). A row's
// size is unchanged, so row_bytes() and row offsets stay the file's.
// The conversion runs on the device, in place, once at load (repack_to_device_format), after the file's
// bytes were uploaded. Pure functions here are thread-safe; recording follows CommandRecorder's rules.
#pragma once
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// The format a matrix of `file_type` with rows of `cols` values has on the device: its device format when
// the rows are whole groups, else the file type itself.
TensorType device_format(TensorType file_type, uint64_t cols);
bool is_device_format(TensorType type);
// The file type a device format regroups (the type itself for file types).
TensorType file_type_of(TensorType type);

// Records the in-place rewrite of `rows` rows of `cols` values of `file_type` at `data` (file layout, the
// view's offset 4-byte aligned) into device_format(file_type, cols). Nothing is recorded when that is the
// file type.
void repack_to_device_format(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView data,
                             TensorType file_type, uint32_t rows, uint32_t cols);

}  // namespace kvtrie::kernels
