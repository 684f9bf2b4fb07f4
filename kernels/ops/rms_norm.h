// Contract: rms_norm, the RMS normalization of rows of f32 activations (rms_norm.comp), alone or
// after the residual add in the same dispatch (add_rms_norm).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// y = x / sqrt(mean(x^2) + eps) * weight (weight optional: empty view). Row r of `rows` starts at
// (r / heads) * stride + (r % heads) * n in x (y_stride in y): heads = 1 and stride = n for plain rows;
// per-head q/k norm: heads = n_heads, n = head_dim, stride = the token stride.
struct RmsNormArgs {
  vk::BufferView x, weight, y;
  uint32_t rows = 0, n = 0;
  float eps = 1e-5f;
  uint32_t heads = 1;
  uint32_t x_stride = 0, y_stride = 0;  // 0: n * heads
  // y as f16 (n and y_stride even), the values convert_f16 would make of the f32 ones: the f16 x of a
  // tensor-core product without a conversion of its own.
  bool half_out = false;
};
void rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a);
// x += residual in place (same layout as x), then y = rms_norm(x) as above: a residual connection and the
// following norm in one dispatch, with the values of add() then rms_norm().
void add_rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a, vk::BufferView residual);

}  // namespace kvtrie::kernels
