// Contract: rope, rotary position embedding in place on f32 q or k rows (rope.comp).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

enum class RopeMode : uint32_t { Normal = 0, Neox = 1 };
// In place on x: token t (position positions[t], int32) has n_heads heads of head_dim floats, heads
// contiguous, tokens token_stride floats apart (0: n_heads * head_dim). freq_factors (rope_dims/2 floats)
// optional.
struct RopeArgs {
  vk::BufferView x, positions, freq_factors;
  uint32_t n_tokens = 0, n_heads = 0, head_dim = 0, rope_dims = 0;
  uint32_t token_stride = 0;
  float freq_base = 10000.0f;
  RopeMode mode = RopeMode::Normal;
};
void rope(vk::CommandRecorder& rec, const Kernels& k, const RopeArgs& a);

}  // namespace kvtrie::kernels
