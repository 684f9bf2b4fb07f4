#include "runner/model/quantization.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
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

// ---- rows -------------------------------------------------------------------------------------------------

namespace {

// Every type, one row each: its block decoder and encoder (quantization_blocks.h). The float types are
// blocks of one element.
struct BlockCodec {
  TensorType type;
  void (*dequantize)(const uint8_t*, float*);
  void (*quantize)(const float*, uint8_t*);
};

void dequantize_f32(const uint8_t* src, float* dst) {
  std::memcpy(dst, src, sizeof(float));
}
void quantize_f32(const float* src, uint8_t* dst) {
  std::memcpy(dst, src, sizeof(float));
}
void dequantize_f16(const uint8_t* src, float* dst) {
  *dst = fp16_to_fp32(quant_detail::load_u16(src));
}
void quantize_f16(const float* src, uint8_t* dst) {
  quant_detail::store_u16(dst, fp32_to_fp16(*src));
}
void dequantize_bf16(const uint8_t* src, float* dst) {
  *dst = bf16_to_fp32(quant_detail::load_u16(src));
}
void quantize_bf16(const float* src, uint8_t* dst) {
  quant_detail::store_u16(dst, fp32_to_bf16(*src));
}

const BlockCodec& codec_for(TensorType type, uint64_t n) {
  using namespace quant_detail;
  // Every file type of the manifest: dequantize_<variant> and quantize_<variant> (device formats are the
  // GPU's own: tests/support/device_format.h writes them).
  static constexpr BlockCodec kCodecs[] = {
#define KVTRIE_FILE_TYPE(name, variant, ...) {TensorType::name, dequantize_##variant, quantize_##variant},
#define KVTRIE_DEVICE_FORMAT(...)
#include "base/tensor_types.def"
  };
  const TensorTypeInfo& info = tensor_type_info(type);
  KVTRIE_CHECK(n % info.block_elements == 0,
               std::string(info.name) + " row of " + std::to_string(n) + " elements is not whole blocks");
  for (const BlockCodec& c : kCodecs)
    if (c.type == type) return c;
  throw Error("no CPU codec for tensor type " + std::string(info.name));
}

}  // namespace

void dequantize_row(TensorType type, const uint8_t* src, float* dst, uint64_t n) {
  const BlockCodec& codec = codec_for(type, n);
  const TensorTypeInfo& info = tensor_type_info(type);
  for (uint64_t b = 0; b < n / info.block_elements; ++b)
    codec.dequantize(src + b * info.block_bytes, dst + b * info.block_elements);
}

void quantize_row(TensorType type, const float* src, uint8_t* dst, uint64_t n) {
  const BlockCodec& codec = codec_for(type, n);
  const TensorTypeInfo& info = tensor_type_info(type);
  for (uint64_t b = 0; b < n / info.block_elements; ++b)
    codec.quantize(src + b * info.block_elements, dst + b * info.block_bytes);
}

}  // namespace kvtrie
