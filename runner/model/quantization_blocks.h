// Contract: internal to runner/model/quantization.cpp: one function per (type, direction) working on a
// single block of GGML's on-disk layout (block_elements values <-> block_bytes bytes, little-endian). Not a
// public API; include only from the quantization sources. Pure functions, safe from any thread.
#pragma once
#include <cstdint>
#include <cstring>

#include "runner/model/quantization.h"

namespace kvtrie::quant_detail {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);  // GGUF is little-endian, as are all hosts kvtrie targets
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}
inline float load_half(const uint8_t* p) {
  return fp16_to_fp32(load_u16(p));
}
// Stores `v` as fp16 and returns the value actually stored, so quantizers divide by the scale the
// dequantizer will multiply by.
inline float store_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  store_u16(p, h);
  return fp16_to_fp32(h);
}

void dequantize_q8_0(const uint8_t* block, float* out);
void dequantize_q4_0(const uint8_t* block, float* out);
void dequantize_q4_1(const uint8_t* block, float* out);
void dequantize_q5_0(const uint8_t* block, float* out);
void dequantize_q5_1(const uint8_t* block, float* out);
void dequantize_q4_k(const uint8_t* block, float* out);
void dequantize_q5_k(const uint8_t* block, float* out);
void dequantize_q6_k(const uint8_t* block, float* out);

void quantize_q8_0(const float* in, uint8_t* block);
void quantize_q4_0(const float* in, uint8_t* block);
void quantize_q4_1(const float* in, uint8_t* block);
void quantize_q5_0(const float* in, uint8_t* block);
void quantize_q5_1(const float* in, uint8_t* block);
void quantize_q4_k(const float* in, uint8_t* block);
void quantize_q5_k(const float* in, uint8_t* block);
void quantize_q6_k(const float* in, uint8_t* block);

}  // namespace kvtrie::quant_detail
