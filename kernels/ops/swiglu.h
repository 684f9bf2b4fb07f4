// Contract: swiglu, the SwiGLU activation of the feed-forward layer over f32 values (swiglu.comp).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// out = silu(gate) * up over count values. half_out: out as f16 (count even), the values convert_f16
// would make of the f32 ones.
void swiglu(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate, vk::BufferView up,
            vk::BufferView out, uint32_t count, bool half_out = false);
// out[t][c] = silu(gate_up[t][c]) * gate_up[t][n + c] for tokens x n values: the output of one product of
// the joined [gate; up] matrix (2 n values a token) to SwiGLU's (n a token). half_out as above (n even).
void swiglu_joined(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate_up, vk::BufferView out,
                   uint32_t tokens, uint32_t n, bool half_out = false);

}  // namespace kvtrie::kernels
