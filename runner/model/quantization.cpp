#include "runner/model/quantization.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/error.h"
#include "runner/model/quantization_blocks.h"

namespace kvtrie {

// ---- 16-bit floats ----------------------------------------------------------------------------------------

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / nan (payload kept)
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

namespace {

// Shift `value` right by `shift` bits, rounding to nearest with ties to even.
uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rem = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
}

}  // namespace

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    // NaN: keep the top payload bits and force the quiet bit so the result stays a NaN.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16: ties-to-even goes to inf.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) and round away 13 mantissa bits. A carry out of the
    // mantissa correctly bumps the exponent.
    return static_cast<uint16_t>(sign | shift_round_even(abs - (112u << 23), 13));
  }
  // Subnormal half or zero: the result is round(|f| * 2^24) units of 2^-24.
  if (abs <= 0x33000000u) return sign;  // |f| <= 2^-25 rounds to (signed) zero; 2^-25 itself is a tie to 0
  const uint32_t exp = abs >> 23;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_round_even(mant, 126u - exp));
}

float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  // Overflow rounds into the exponent and yields inf, as round-to-nearest requires.
  return static_cast<uint16_t>(shift_round_even(x, 16));
}

// ---- dispatch
// -----------------------------------------------------------------------------------------------

namespace {

void check_row(TensorType type, uint64_t n) {
  const TensorTypeInfo& info = tensor_type_info(type);
  KVTRIE_CHECK(n % info.block_elements == 0,
               std::string(info.name) + " row of " + std::to_string(n) + " elements is not whole blocks");
}

// The block types: one row per type, its block decoder and encoder (quantization_blocks.h).
struct BlockCodec {
  TensorType type;
  void (*dequantize)(const uint8_t*, float*);
  void (*quantize)(const float*, uint8_t*);
};

const BlockCodec* find_codec(TensorType type) {
  using namespace quant_detail;
  static constexpr BlockCodec kCodecs[] = {
      {TensorType::Q8_0, dequantize_q8_0, quantize_q8_0}, {TensorType::Q4_0, dequantize_q4_0, quantize_q4_0},
      {TensorType::Q4_1, dequantize_q4_1, quantize_q4_1}, {TensorType::Q5_0, dequantize_q5_0, quantize_q5_0},
      {TensorType::Q5_1, dequantize_q5_1, quantize_q5_1}, {TensorType::Q4_K, dequantize_q4_k, quantize_q4_k},
      {TensorType::Q5_K, dequantize_q5_k, quantize_q5_k}, {TensorType::Q6_K, dequantize_q6_k, quantize_q6_k},
  };
  for (const BlockCodec& c : kCodecs)
    if (c.type == type) return &c;
  return nullptr;
}

}  // namespace

void dequantize_row(TensorType type, const uint8_t* src, float* dst, uint64_t n) {
  check_row(type, n);
  const uint64_t blocks = n / tensor_type_info(type).block_elements;
  const uint32_t bytes = tensor_type_info(type).block_bytes;
  using namespace quant_detail;
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case TensorType::F16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
      return;
    case TensorType::BF16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
      return;
    default:
      break;
  }
  const BlockCodec* codec = find_codec(type);
  KVTRIE_CHECK(codec != nullptr, "dequantize_row: unsupported type");
  const auto block_fn = codec->dequantize;
  const uint32_t per_block = tensor_type_info(type).block_elements;
  for (uint64_t b = 0; b < blocks; ++b) block_fn(src + b * bytes, dst + b * per_block);
}

void quantize_row(TensorType type, const float* src, uint8_t* dst, uint64_t n) {
  check_row(type, n);
  const uint64_t blocks = n / tensor_type_info(type).block_elements;
  const uint32_t bytes = tensor_type_info(type).block_bytes;
  using namespace quant_detail;
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case TensorType::F16:
      for (uint64_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
      return;
    case TensorType::BF16:
      for (uint64_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_bf16(src[i]));
      return;
    default:
      break;
  }
  const BlockCodec* codec = find_codec(type);
  KVTRIE_CHECK(codec != nullptr, "quantize_row: unsupported type");
  const auto block_fn = codec->quantize;
  const uint32_t per_block = tensor_type_info(type).block_elements;
  for (uint64_t b = 0; b < blocks; ++b) block_fn(src + b * per_block, dst + b * bytes);
}

}  // namespace kvtrie
