// Contract: builds a GGUF v3 file (metadata of every type, arrays, tensors of any supported type) and writes
// it, the counterpart of GgufFile. Used by tests and by the synthetic-model writer (bench/synthetic). A
// GgufWriter is a plain value owned by one thread; only write()'s `fill` callback is called from several
// threads (each tensor exactly once). Misuse (a value that does not match its type, data of the wrong size,
// a duplicate tensor) throws kvtrie::Error; I/O failures throw kvtrie::Error naming the path.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/model/gguf_file.h"

namespace kvtrie {

// Receives one tensor's bytes, in order, during GgufWriter::write(). Writes go straight to the file at the
// tensor's offset, so a multi-gigabyte tensor never has to be held in memory at once.
class GgufTensorSink {
 public:
  void write(std::span<const uint8_t> bytes);  // throws Error on I/O failure or when writing past the tensor
  uint64_t written() const { return written_; }
  uint64_t size() const { return size_; }

 private:
  friend class GgufWriter;
  GgufTensorSink(int fd, uint64_t file_offset, uint64_t size, const std::string& path)
      : fd_(fd), file_offset_(file_offset), size_(size), path_(&path) {}
  int fd_;
  uint64_t file_offset_;
  uint64_t size_;
  uint64_t written_ = 0;
  const std::string* path_;
};

class GgufWriter {
 public:
  GgufWriter() = default;

  // Metadata, written in insertion order; setting a key again replaces its value in place.
  void set(std::string key, GgufEntry entry);  // throws Error when the value does not match entry.type
  void set_u8(std::string key, uint8_t v) { set(std::move(key), {GgufValueType::UINT8, uint64_t{v}}); }
  void set_i8(std::string key, int8_t v) { set(std::move(key), {GgufValueType::INT8, int64_t{v}}); }
  void set_u16(std::string key, uint16_t v) { set(std::move(key), {GgufValueType::UINT16, uint64_t{v}}); }
  void set_i16(std::string key, int16_t v) { set(std::move(key), {GgufValueType::INT16, int64_t{v}}); }
  void set_u32(std::string key, uint32_t v) { set(std::move(key), {GgufValueType::UINT32, uint64_t{v}}); }
  void set_i32(std::string key, int32_t v) { set(std::move(key), {GgufValueType::INT32, int64_t{v}}); }
  void set_u64(std::string key, uint64_t v) { set(std::move(key), {GgufValueType::UINT64, v}); }
  void set_i64(std::string key, int64_t v) { set(std::move(key), {GgufValueType::INT64, v}); }
  void set_f32(std::string key, float v) { set(std::move(key), {GgufValueType::FLOAT32, double{v}}); }
  void set_f64(std::string key, double v) { set(std::move(key), {GgufValueType::FLOAT64, v}); }
  void set_bool(std::string key, bool v) { set(std::move(key), {GgufValueType::BOOL, v}); }
  void set_string(std::string key, std::string v) {
    set(std::move(key), {GgufValueType::STRING, std::move(v)});
  }
  void set_array(std::string key, GgufArray v) { set(std::move(key), {GgufValueType::ARRAY, std::move(v)}); }
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, std::vector<double> v);   // stored as FLOAT32
  void set_i32_array(std::string key, std::vector<int64_t> v);  // stored as INT32
  bool erase(std::string_view key);
  const std::vector<std::pair<std::string, GgufEntry>>& metadata() const { return metadata_; }

  // general.alignment (default 32): a non-zero power of two; also sets the metadata key.
  void set_alignment(uint32_t alignment);
  uint64_t alignment() const { return alignment_; }

  // Tensors, laid out in insertion order, each at the next aligned offset. Shape is GGUF order (shape[0]
  // innermost). With `data` the bytes are stored now (size must be exact); without, write()'s fill supplies
  // them. Returns the tensor's index.
  size_t add_tensor(std::string name, TensorType type, std::vector<uint64_t> shape,
                    std::optional<std::vector<uint8_t>> data = std::nullopt);
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> shape;
    uint64_t bytes;   // exact size of its data
    uint64_t offset;  // relative to the data section
    std::optional<std::vector<uint8_t>> data;
  };
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // The header (everything before the data section, padding included) as it will be written.
  std::vector<uint8_t> header_bytes() const;
  uint64_t file_size() const;

  // fill(index, sink) must write exactly tensors()[index].bytes bytes for each tensor added without data;
  // it runs on `threads` threads (0 = hardware concurrency), each tensor once. With `sparse`, tensors without
  // data and no fill are left as holes (zeros): a file of the right size without writing its bytes.
  using Fill = std::function<void(size_t index, GgufTensorSink& sink)>;
  void write(const std::filesystem::path& path, const Fill& fill = {}, unsigned threads = 1,
             bool sparse = false) const;
  // The whole file in memory (every tensor must have data): for small test files.
  std::vector<uint8_t> to_bytes() const;

 private:
  std::vector<std::pair<std::string, GgufEntry>> metadata_;
  std::vector<Tensor> tensors_;
  uint64_t alignment_ = 32;
  uint64_t data_size_ = 0;
};

}  // namespace kvtrie
