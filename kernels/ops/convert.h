// Contract: convert_f16, f32 values to packed f16 (convert.comp).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// out = f16(x) over count values (even), packed: the f16 copy of x that matmul's CoopMat2 path reads.
void convert_f16(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView out,
                 uint32_t count);

}  // namespace kvtrie::kernels
