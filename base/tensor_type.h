// Contract: the tensor element types kvtrie supports (GGML's numbering, as stored in GGUF files) and their
// block layout, and the device formats kernels regroup some of them into. Pure data, header-only, usable
// from any thread. A "block" is the unit of quantization: block_elements values stored in block_bytes
// bytes; a row's length must be a multiple of block_elements. The types are listed once, in
// base/tensor_types.def; the enum and the tables here are made from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>

namespace kvtrie {

// GGML's ids for file types; device formats (kernels/ops/weight_format.h: file blocks regrouped on the
// device so that shaders load quants 16 bytes at a time) take ids past GGML's and never appear in files.
enum class TensorType : uint32_t {
#define KVTRIE_FILE_TYPE(name, variant, id, ...) name = id,
#define KVTRIE_DEVICE_FORMAT(name, variant, id, ...) name = id,
#include "base/tensor_types.def"
};

struct TensorTypeInfo {
  TensorType type;
  std::string_view name;
  uint32_t block_elements;
  uint32_t block_bytes;
  std::string_view variant;  // the name in lower case: the suffix of the type's shader variants ("q4_k")
  bool tiled;                // blocks 16-byte aligned: shaders load 16 values at a time (tensor_types.def)
  TensorType file_type;      // a device format: the file type it regroups; a file type: itself
};

// Every type in the manifest's order: the file types, then the device formats.
inline constexpr TensorTypeInfo kAllTensorTypes[] = {
#define KVTRIE_FILE_TYPE(name, variant, id, elements, bytes, tiled) \
  {TensorType::name, #name, elements, bytes, #variant, tiled != 0, TensorType::name},
#define KVTRIE_DEVICE_FORMAT(name, variant, id, elements, bytes, file) \
  {TensorType::name, #name, elements, bytes, #variant, true, TensorType::file},
#include "base/tensor_types.def"
};
inline constexpr size_t kFileTypeCount = [] {
  size_t n = 0;
  while (n < std::size(kAllTensorTypes) && kAllTensorTypes[n].file_type == kAllTensorTypes[n].type) ++n;
  return n;
}();

// The file types.
inline constexpr std::span<const TensorTypeInfo> kTensorTypes{kAllTensorTypes, kFileTypeCount};
// The device formats: 8 file blocks (Q4_0, Q8_0) or superblocks (Q6_K) as one 16-byte aligned group.
inline constexpr std::span<const TensorTypeInfo> kDeviceFormats =
    std::span<const TensorTypeInfo>(kAllTensorTypes).subspan(kFileTypeCount);

// Info for a raw GGML type id as found in a file, or nullopt when kvtrie does not support it.
constexpr std::optional<TensorTypeInfo> tensor_type_info(uint32_t ggml_type) {
  for (const TensorTypeInfo& info : kTensorTypes)
    if (static_cast<uint32_t>(info.type) == ggml_type) return info;
  return std::nullopt;
}

constexpr const TensorTypeInfo& tensor_type_info(TensorType type) {
  for (const TensorTypeInfo& info : kAllTensorTypes)
    if (info.type == type) return info;
  return kTensorTypes[0];  // unreachable: every enumerator is in the table
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

namespace tensor_type_detail {
// The manifest's variant column is its name in lower case.
constexpr bool variant_is_lower_case_name(const TensorTypeInfo& info) {
  if (info.variant.size() != info.name.size()) return false;
  for (size_t i = 0; i < info.name.size(); ++i) {
    const char c = info.name[i];
    if (info.variant[i] != (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c)) return false;
  }
  return true;
}
}  // namespace tensor_type_detail
static_assert([] {
  for (const TensorTypeInfo& info : kAllTensorTypes)
    if (!tensor_type_detail::variant_is_lower_case_name(info)) return false;
  for (const TensorTypeInfo& info : kDeviceFormats)
    if (info.file_type == info.type) return false;  // the file types come first
  return true;
}());

}  // namespace kvtrie
