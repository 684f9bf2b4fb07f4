// Contract: activations quantized for matvec_q8 (kernels/shaders/q8_activations.glsl): every 16 values of a
// token as 16 signed bytes q, with a scale d = max|x| / 127 and the sum of q, so that x ~= d * q. Written by
// quantize_q8 (matvec_q8.h), by a SwiGLU product's quantized_out and by attention's combine pass, read by
// matvec_q8. Views only; the owner keeps the buffers alive while recordings that use them run.
#pragma once
#include <cstdint>

#include "kernels/vk/buffer.h"

namespace kvtrie::kernels {

struct QuantizedX {
  vk::BufferView bytes;    // 16 bytes per 16 values, token t at value t * stride
  vk::BufferView scales;   // (scale, sum as float bits) per 16 values, likewise
  vk::BufferView inv_rms;  // a float per token: 1 / rms of the normed input (written with a norm)
  uint32_t stride = 0;     // values between tokens (a multiple of 16)
};

}  // namespace kvtrie::kernels
