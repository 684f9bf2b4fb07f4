// Contract: add_bias, a bias added to every row of f32 values in place (add_bias.comp).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// x[r * stride + c] += bias[c], c < n, in place (stride 0: n).
void add_bias(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView bias,
              uint32_t rows, uint32_t n, uint32_t stride = 0);

}  // namespace kvtrie::kernels
