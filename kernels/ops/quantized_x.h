// Contract: activations quantized for matvec_q8 (kernels/shaders/q8_activations.glsl): every 16 values of a
// token as 16 signed bytes q, with a scale d = max|x| / 127 and the sum of q, so that x ~= d * q. Written by
// quantize_q8 (matvec_q8.h), by a SwiGLU product's quantized_out and by attention's combine pass, read by
// matvec_q8. A normed input (rms_norm(x) * weight, the 1 / rms left to the product) also carries each
// group's sum of squares of x, from which the product computes the token's 1 / rms in one fixed order, so
// that a token's bits never depend on which shader quantized it. QuantizedX holds views only;
// QuantizedBuffers owns device buffers sized for it, which must outlive the recordings that use them.
#pragma once
#include <cstdint>

#include "kernels/vk/buffer.h"

namespace kvtrie::kernels {

struct QuantizedX {
  vk::BufferView bytes;        // 16 bytes per 16 values, token t at value t * stride
  vk::BufferView scales;       // (scale, sum as float bits) per 16 values, likewise
  vk::BufferView sum_squares;  // with a norm: a float per 16 values, their sum of squares before the norm
  uint32_t stride = 0;         // values between tokens (a multiple of 16)

  // The tokens from token t on: each view starts t tokens later (an empty sum_squares stays empty).
  QuantizedX from_token(uint32_t t) const {
    const uint64_t groups = uint64_t{t} * stride / 16;
    const auto tail = [](vk::BufferView v, uint64_t offset) {
      return v.empty() ? v : v.sub(offset, v.range - offset);
    };
    return {tail(bytes, groups * 16), tail(scales, groups * 8), tail(sum_squares, groups * 4), stride};
  }
};

// Device-local buffers for `tokens` tokens of `stride` values quantized, with sums of squares for a norm.
struct QuantizedBuffers {
  vk::Buffer bytes, scales, sum_squares;
  uint32_t stride = 0;

  QuantizedBuffers() = default;
  QuantizedBuffers(const vk::Device& device, uint64_t tokens, uint32_t values_stride, bool with_sum_squares)
      : bytes(device, tokens * values_stride + 16, vk::MemoryKind::DeviceLocal),
        scales(device, tokens * values_stride / 2 + 16, vk::MemoryKind::DeviceLocal),
        stride(values_stride) {
    if (with_sum_squares)
      sum_squares = vk::Buffer(device, tokens * values_stride / 4 + 16, vk::MemoryKind::DeviceLocal);
  }
  QuantizedX view() const {
    return {bytes.view(), scales.view(), sum_squares.valid() ? sum_squares.view() : vk::BufferView{}, stride};
  }
};

}  // namespace kvtrie::kernels
