// Contract: CPU conversion between float32 and every supported tensor type (base/tensor_type.h), one row
// at a time. These are the reference the GPU shaders are tested against and what the synthetic-model
// writer uses to store weights. Pure functions, safe from any thread. `n` must be a multiple of the type's
// block_elements; `src`/`dst` must hold row_bytes(type, n) bytes on the quantized side.
#pragma once
#include <cstdint>

#include "base/tensor_type.h"

namespace kvtrie {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even; overflow to inf
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

void dequantize_row(TensorType type, const uint8_t* src, float* dst, uint64_t n);
// Simple round-to-nearest quantization (not an importance-weighted search): good enough for synthetic
// weights and tests; dequantize_row(quantize_row(x)) is close to x within the type's precision.
void quantize_row(TensorType type, const float* src, uint8_t* dst, uint64_t n);

}  // namespace kvtrie
