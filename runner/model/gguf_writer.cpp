#include "runner/model/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "base/error.h"

namespace kvtrie {

namespace {

class Bytes {
 public:
  explicit Bytes(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);  // little-endian host (x86-64, aarch64)
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

template <typename T>
T narrow_unsigned(uint64_t v, std::string_view key) {
  if (v > std::numeric_limits<T>::max())
    throw Error("GgufWriter: value of '" + std::string(key) + "' out of range");
  return static_cast<T>(v);
}

template <typename T>
T narrow_signed(int64_t v, std::string_view key) {
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
    throw Error("GgufWriter: value of '" + std::string(key) + "' out of range");
  return static_cast<T>(v);
}

// Writes one scalar held in the reader's representation (widest type of its kind) as type t.
void put_scalar(Bytes& b, GgufValueType t, const GgufValue& v, std::string_view key) {
  auto wrong = [&]() {
    return Error("GgufWriter: value of '" + std::string(key) + "' does not match its type");
  };
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::UINT16:
    case GgufValueType::UINT32:
    case GgufValueType::UINT64: {
      const auto* u = std::get_if<uint64_t>(&v);
      if (!u) throw wrong();
      if (t == GgufValueType::UINT8) b.put(narrow_unsigned<uint8_t>(*u, key));
      if (t == GgufValueType::UINT16) b.put(narrow_unsigned<uint16_t>(*u, key));
      if (t == GgufValueType::UINT32) b.put(narrow_unsigned<uint32_t>(*u, key));
      if (t == GgufValueType::UINT64) b.put(*u);
      return;
    }
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64: {
      const auto* i = std::get_if<int64_t>(&v);
      if (!i) throw wrong();
      if (t == GgufValueType::INT8) b.put(narrow_signed<int8_t>(*i, key));
      if (t == GgufValueType::INT16) b.put(narrow_signed<int16_t>(*i, key));
      if (t == GgufValueType::INT32) b.put(narrow_signed<int32_t>(*i, key));
      if (t == GgufValueType::INT64) b.put(*i);
      return;
    }
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64: {
      const auto* d = std::get_if<double>(&v);
      if (!d) throw wrong();
      if (t == GgufValueType::FLOAT32)
        b.put(static_cast<float>(*d));
      else
        b.put(*d);
      return;
    }
    case GgufValueType::BOOL: {
      const auto* x = std::get_if<bool>(&v);
      if (!x) throw wrong();
      b.put<uint8_t>(*x ? 1 : 0);
      return;
    }
    case GgufValueType::STRING: {
      const auto* s = std::get_if<std::string>(&v);
      if (!s) throw wrong();
      b.str(*s);
      return;
    }
    case GgufValueType::ARRAY:
      break;
  }
  throw wrong();
}

void put_entry(Bytes& b, std::string_view key, const GgufEntry& e) {
  if (static_cast<uint32_t>(e.type) > static_cast<uint32_t>(GgufValueType::FLOAT64))
    throw Error("GgufWriter: unknown value type for '" + std::string(key) + "'");
  b.put(static_cast<uint32_t>(e.type));
  if (e.type != GgufValueType::ARRAY) {
    put_scalar(b, e.type, e.value, key);
    return;
  }
  const auto* a = std::get_if<GgufArray>(&e.value);
  if (!a || a->element_type == GgufValueType::ARRAY ||
      static_cast<uint32_t>(a->element_type) > static_cast<uint32_t>(GgufValueType::FLOAT64))
    throw Error("GgufWriter: array value of '" + std::string(key) + "' is malformed");
  b.put(static_cast<uint32_t>(a->element_type));
  b.put<uint64_t>(a->size());
  std::visit(
      [&](const auto& vec) {
        for (const auto& x : vec) put_scalar(b, a->element_type, GgufValue(x), key);
      },
      a->values);
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw Error("GgufWriter: " + what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

void GgufTensorSink::write(std::span<const uint8_t> bytes) {
  KVTRIE_CHECK(bytes.size() <= size_ - written_, "tensor data longer than the tensor in " + *path_);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                               static_cast<off_t>(file_offset_ + written_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_error("cannot write", *path_);
    done += static_cast<size_t>(n);
  }
  written_ += bytes.size();
}

void GgufWriter::set(std::string key, GgufEntry entry) {
  std::vector<uint8_t> scratch;
  Bytes b(scratch);
  put_entry(b, key, entry);  // validates now, so write() cannot fail on a value
  for (auto& [k, e] : metadata_)
    if (k == key) {
      e = std::move(entry);
      return;
    }
  metadata_.emplace_back(std::move(key), std::move(entry));
}

void GgufWriter::set_string_array(std::string key, std::vector<std::string> v) {
  set_array(std::move(key), GgufArray{GgufValueType::STRING, std::move(v)});
}
void GgufWriter::set_f32_array(std::string key, std::vector<double> v) {
  set_array(std::move(key), GgufArray{GgufValueType::FLOAT32, std::move(v)});
}
void GgufWriter::set_i32_array(std::string key, std::vector<int64_t> v) {
  set_array(std::move(key), GgufArray{GgufValueType::INT32, std::move(v)});
}

bool GgufWriter::erase(std::string_view key) {
  for (auto it = metadata_.begin(); it != metadata_.end(); ++it)
    if (it->first == key) {
      metadata_.erase(it);
      return true;
    }
  return false;
}

void GgufWriter::set_alignment(uint32_t alignment) {
  KVTRIE_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0, "alignment must be a power of two");
  KVTRIE_CHECK(tensors_.empty(), "set the alignment before adding tensors");
  alignment_ = alignment;
  set_u32("general.alignment", alignment);
}

size_t GgufWriter::add_tensor(std::string name, TensorType type, std::vector<uint64_t> shape,
                              std::optional<std::vector<uint8_t>> data) {
  KVTRIE_CHECK(!shape.empty() && shape.size() <= 4, "tensor '" + name + "' needs 1 to 4 dimensions");
  for (const Tensor& t : tensors_) KVTRIE_CHECK(t.name != name, "duplicate tensor '" + name + "'");
  const TensorTypeInfo& info = tensor_type_info(type);
  KVTRIE_CHECK(
      shape[0] % info.block_elements == 0,
      "tensor '" + name + "' row length is not a multiple of the " + std::string(info.name) + " block");
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    KVTRIE_CHECK(d != 0, "tensor '" + name + "' has a zero dimension");
    KVTRIE_CHECK(!__builtin_mul_overflow(elements, d, &elements), "tensor '" + name + "' is too large");
  }
  const uint64_t bytes = elements / info.block_elements * info.block_bytes;
  if (data) KVTRIE_CHECK(data->size() == bytes, "tensor '" + name + "' data has the wrong size");
  const uint64_t offset = align_up(data_size_, alignment_);
  data_size_ = offset + bytes;
  tensors_.push_back({std::move(name), type, std::move(shape), bytes, offset, std::move(data)});
  return tensors_.size() - 1;
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> out;
  // Reserved up front: besides saving reallocations, this keeps GCC 12 at -O3 from a false
  // -Wstringop-overflow / -Warray-bounds on inserts into a vector it believes tiny.
  out.reserve(64 * 1024);
  Bytes b(out);
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors_.size());
  b.put<uint64_t>(metadata_.size());
  for (const auto& [key, entry] : metadata_) {
    b.str(key);
    put_entry(b, key, entry);
  }
  for (const Tensor& t : tensors_) {
    b.str(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) b.put(d);
    b.put(static_cast<uint32_t>(t.type));
    b.put(t.offset);
  }
  out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

uint64_t GgufWriter::file_size() const {
  // The data section ends with the last tensor, padded to the alignment like every tensor start.
  return header_bytes().size() + align_up(data_size_, alignment_);
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  const size_t data_start = out.size();
  out.resize(data_start + align_up(data_size_, alignment_), 0);
  for (const Tensor& t : tensors_) {
    KVTRIE_CHECK(t.data.has_value(), "tensor '" + t.name + "' has no data");
    std::memcpy(out.data() + data_start + t.offset, t.data->data(), t.data->size());
  }
  return out;
}

void GgufWriter::write(const std::filesystem::path& path, const Fill& fill, unsigned threads,
                       bool sparse) const {
  const std::string final_name = path.string();
  const std::string tmp_name = final_name + ".partial";
  const std::vector<uint8_t> header = header_bytes();
  const uint64_t total = header.size() + align_up(data_size_, alignment_);

  const int fd = ::open(tmp_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create", tmp_name);
  struct Closer {
    int fd;
    std::string name;
    bool keep = false;
    ~Closer() {
      ::close(fd);
      if (!keep) ::unlink(name.c_str());
    }
  } closer{fd, tmp_name};

  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) io_error("cannot size", tmp_name);
  GgufTensorSink head(fd, 0, header.size(), tmp_name);
  head.write(header);

  std::vector<size_t> pending;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.data) {
      GgufTensorSink sink(fd, header.size() + t.offset, t.bytes, tmp_name);
      sink.write(*t.data);
    } else if (fill) {
      pending.push_back(i);
    } else {
      KVTRIE_CHECK(sparse, "tensor '" + t.name + "' has no data and no fill was given");
    }
  }

  if (!pending.empty()) {
    // Largest first, so that one big tensor started last does not leave the other threads idle.
    std::stable_sort(pending.begin(), pending.end(),
                     [&](size_t a, size_t b) { return tensors_[a].bytes > tensors_[b].bytes; });
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<unsigned>(std::min<size_t>(threads, pending.size()));
    std::atomic<size_t> next{0};
    std::exception_ptr first_error;
    std::mutex error_mutex;
    auto worker = [&]() {
      for (size_t k = next++; k < pending.size(); k = next++) {
        const Tensor& t = tensors_[pending[k]];
        try {
          GgufTensorSink sink(fd, header.size() + t.offset, t.bytes, tmp_name);
          fill(pending[k], sink);
          KVTRIE_CHECK(sink.written() == t.bytes, "fill wrote too few bytes for tensor '" + t.name + "'");
        } catch (...) {
          const std::lock_guard lock(error_mutex);
          if (!first_error) first_error = std::current_exception();
          next = pending.size();  // stop the other workers early
        }
      }
    };
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i) pool.emplace_back(worker);
    worker();
    for (std::thread& th : pool) th.join();
    if (first_error) std::rethrow_exception(first_error);
  }

  if (std::rename(tmp_name.c_str(), final_name.c_str()) != 0) io_error("cannot rename to", final_name);
  closer.keep = true;
}

}  // namespace kvtrie
