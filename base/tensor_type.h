// Contract: the tensor element types kvtrie supports (GGML's numbering, as stored in GGUF files) and their
// block layout, and the device formats kernels regroup some of them into. Pure data, header-only, usable
// from any thread. A "block" is the unit of quantization: block_elements values stored in block_bytes
// bytes; a row's length must be a multiple of block_elements.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvtrie {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
  // Device formats (kernels/ops/weight_format.h): file blocks regrouped on the device so that shaders load
  // quants 16 bytes at a time. Never in files; ids past GGML's.
  Q4_0x8 = 102,
  Q8_0x8 = 108,
  Q6_Kx8 = 114,
};

struct TensorTypeInfo {
  TensorType type;
  std::string_view name;
  uint32_t block_elements;
  uint32_t block_bytes;
};

inline constexpr TensorTypeInfo kTensorTypes[] = {
    {TensorType::F32, "F32", 1, 4},       {TensorType::F16, "F16", 1, 2},
    {TensorType::BF16, "BF16", 1, 2},     {TensorType::Q8_0, "Q8_0", 32, 34},
    {TensorType::Q4_0, "Q4_0", 32, 18},   {TensorType::Q4_1, "Q4_1", 32, 20},
    {TensorType::Q5_0, "Q5_0", 32, 22},   {TensorType::Q5_1, "Q5_1", 32, 24},
    {TensorType::Q4_K, "Q4_K", 256, 144}, {TensorType::Q5_K, "Q5_K", 256, 176},
    {TensorType::Q6_K, "Q6_K", 256, 210},
};

// The device formats: 8 file blocks (Q4_0, Q8_0) or superblocks (Q6_K) as one 16-byte aligned group.
inline constexpr TensorTypeInfo kDeviceFormats[] = {
    {TensorType::Q4_0x8, "Q4_0x8", 256, 144},
    {TensorType::Q8_0x8, "Q8_0x8", 256, 272},
    {TensorType::Q6_Kx8, "Q6_Kx8", 2048, 1680},
};

// Info for a raw GGML type id as found in a file, or nullopt when kvtrie does not support it.
constexpr std::optional<TensorTypeInfo> tensor_type_info(uint32_t ggml_type) {
  for (const TensorTypeInfo& info : kTensorTypes)
    if (static_cast<uint32_t>(info.type) == ggml_type) return info;
  return std::nullopt;
}

constexpr const TensorTypeInfo& tensor_type_info(TensorType type) {
  for (const TensorTypeInfo& info : kTensorTypes)
    if (info.type == type) return info;
  for (const TensorTypeInfo& info : kDeviceFormats)
    if (info.type == type) return info;
  return kTensorTypes[0];  // unreachable: every enumerator is in a table
}

constexpr std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const TensorTypeInfo& info : kTensorTypes)
    if (info.name == name) return info.type;
  return std::nullopt;
}

// Bytes of one row of `elements` values (elements must be a multiple of block_elements).
constexpr uint64_t row_bytes(TensorType type, uint64_t elements) {
  const TensorTypeInfo& info = tensor_type_info(type);
  return elements / info.block_elements * info.block_bytes;
}

}  // namespace kvtrie
