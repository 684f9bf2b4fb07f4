// Contract: the test reference for the device weight formats (kernels/ops/weight_format.h), written
// independently of the repack shader: file rows regrouped on the CPU, so tests can hand shaders weights in
// a device format and check the device's own conversion byte for byte; and quantize_rows(), random rows
// in any type for kernel tests. Header-only, pure functions.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "base/error.h"
#include "base/tensor_type.h"
#include "kernels/ops/weight_format.h"
#include "runner/model/quantization.h"

namespace kvtrie::test {

// `bytes` (whole rows of `file_type`, rows of `cols` values) in `format`: every 8 blocks become their 8
// bodies (all bytes but the f16 scale d) followed by their 8 d.
inline std::vector<uint8_t> to_device_format(TensorType format, uint64_t cols,
                                             std::span<const uint8_t> bytes) {
  const TensorType file = kernels::file_type_of(format);
  if (file == format) return {bytes.begin(), bytes.end()};
  KVTRIE_CHECK(cols % tensor_type_info(format).block_elements == 0, "rows are not whole groups");
  const uint32_t block = tensor_type_info(file).block_bytes;
  const uint32_t d_at = file == TensorType::Q6_K ? block - 2 : 0;  // where d sits in a file block
  const uint32_t body_at = d_at == 0 ? 2 : 0, body = block - 2;
  std::vector<uint8_t> out(bytes.size());
  for (uint64_t g = 0; g < bytes.size() / (8 * block); ++g) {
    const uint8_t* in = bytes.data() + g * 8 * block;
    uint8_t* o = out.data() + g * 8 * block;
    for (uint32_t b = 0; b < 8; ++b) {
      std::memcpy(o + b * body, in + b * block + body_at, body);
      std::memcpy(o + 8 * body + 2 * b, in + b * block + d_at, 2);
    }
  }
  return out;
}

// Rows of `cols` values from `src` quantized to `type` (a device format: quantized to its file type, then
// regrouped) into `bytes`, and the exactly dequantized values into `values`.
inline void quantize_rows(TensorType type, uint32_t rows, uint32_t cols, const float* src,
                          std::vector<uint8_t>& bytes, std::vector<float>& values) {
  const TensorType file = kernels::file_type_of(type);
  const uint64_t rb = row_bytes(file, cols);
  bytes.assign(rb * rows, 0);
  values.assign(uint64_t{rows} * cols, 0.0f);
  for (uint32_t r = 0; r < rows; ++r) {
    quantize_row(file, src + uint64_t{r} * cols, bytes.data() + r * rb, cols);
    dequantize_row(file, bytes.data() + r * rb, values.data() + uint64_t{r} * cols, cols);
  }
  bytes = to_device_format(type, cols, bytes);
}

}  // namespace kvtrie::test
