// Contract: a read-only, memory-mapped GGUF (v2 or v3) file. open() validates the whole header, every
// metadata entry, every tensor info (type, shape, offset, size, alignment, bounds, no overlap) and refuses
// anything corrupt, truncated or unsupported with kvtrie::InputError whose message names the file and the
// problem. After open() succeeds every accessor is safe and never throws; the object is immutable and may be
// read from any thread. Tensor data spans point into the mapping: they live as long as the GgufFile.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/tensor_type.h"

namespace kvtrie {

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// An array value keeps its element type; elements are stored in the widest C++ type of their kind.
struct GgufArray {
  GgufValueType element_type;
  std::variant<std::vector<int64_t>, std::vector<uint64_t>, std::vector<double>, std::vector<bool>,
               std::vector<std::string>>
      values;  // signed ints, unsigned ints, floats, bools, strings (arrays of arrays are refused)
  size_t size() const;
  bool operator==(const GgufArray&) const = default;
};

using GgufValue = std::variant<int64_t, uint64_t, double, bool, std::string, GgufArray>;

struct GgufEntry {
  GgufValueType type;  // the type as stored in the file
  GgufValue value;
  bool operator==(const GgufEntry&) const = default;
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> shape;  // GGUF order: shape[0] is the innermost (contiguous) dimension
  TensorType type;
  uint64_t offset;                // relative to the start of the data section
  std::span<const uint8_t> data;  // exactly the tensor's bytes, inside the mapping
  uint64_t element_count() const;
  uint64_t rows() const;  // element_count() / shape[0]
};

class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);  // throws InputError

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }

  const std::map<std::string, GgufEntry, std::less<>>& metadata() const { return metadata_; }
  const GgufEntry* find(std::string_view key) const;
  // Typed getters: nullopt when the key is absent or holds another kind of value. Integer getters accept
  // any integer type whose value fits; get_float accepts floats and integers.
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  std::filesystem::path path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufEntry, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
};

}  // namespace kvtrie
