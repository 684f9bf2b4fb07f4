#include "runner/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include "base/error.h"

namespace kvtrie {

namespace {

constexpr uint64_t kDefaultAlignment = 32;

// Names of every GGML type id (facts of the format), so that a known but unsupported type is refused by name.
constexpr std::array<std::string_view, 40> kGgmlTypeNames = {
    "F32",      "F16",      "Q4_0",    "Q4_1",  "Q4_2",       "Q4_3",       "Q5_0",       "Q5_1",
    "Q8_0",     "Q8_1",     "Q2_K",    "Q3_K",  "Q4_K",       "Q5_K",       "Q6_K",       "Q8_K",
    "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS", "IQ1_S", "IQ4_NL",     "IQ3_S",      "IQ2_S",      "IQ4_XS",
    "I8",       "I16",      "I32",     "I64",   "F64",        "IQ1_M",      "BF16",       "Q4_0_4_4",
    "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
};

// Quotes a name read from the file for an error message: printable ASCII only, bounded length, so that a
// corrupt name can never break the one-line message.
std::string quote(std::string_view s) {
  std::string out = "'";
  size_t shown = 0;
  for (char c : s) {
    if (shown++ == 80) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out + "'";
}

std::string value_type_name(uint32_t t) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return t < kNames.size() ? std::string(kNames[t]) : "type " + std::to_string(t);
}

bool is_power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

// Sequential little-endian reader over the mapped bytes. Every read checks the remaining size first, so a
// truncated or lying file fails with a message instead of reading past the mapping.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}

  [[noreturn]] void fail(const std::string& problem) const { throw InputError(path_ + ": " + problem); }

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      fail("truncated file: " + std::string(what) + " at offset " + std::to_string(pos_) + " needs " +
           std::to_string(n) + " bytes but only " + std::to_string(remaining()) + " remain");
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));  // memcpy: the file gives no alignment guarantee here
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    if (remaining() < 8) need(8, std::string(what) + " length");
    const auto len = read<uint64_t>(what);
    if (len > remaining())
      fail(std::string(what) + " length " + std::to_string(len) + " exceeds the " +
           std::to_string(remaining()) + " bytes left in the file (truncated or corrupt)");
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

  // Refuses a count of items of at least `min_item_bytes` each that could not fit in what is left, so a
  // huge count never turns into a huge allocation.
  void check_count(uint64_t count, uint64_t min_item_bytes, const std::string& what) const {
    if (count > remaining() / min_item_bytes)
      fail(what + " " + std::to_string(count) + " exceeds what the " + std::to_string(remaining()) +
           " bytes left in the file can hold (truncated or corrupt)");
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

uint64_t scalar_size(uint32_t t) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
      return 8;
    case GgufValueType::STRING:
      return 8;  // at least its length field
    case GgufValueType::ARRAY:
      return 12;  // at least element type and count
  }
  return 0;
}

bool is_known_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufValueType::FLOAT64);
}

enum class Kind { Signed, Unsigned, Float, Bool, String };

Kind kind_of(GgufValueType t) {
  switch (t) {
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64:
      return Kind::Signed;
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64:
      return Kind::Float;
    case GgufValueType::BOOL:
      return Kind::Bool;
    case GgufValueType::STRING:
      return Kind::String;
    default:
      return Kind::Unsigned;
  }
}

// Reads one scalar of type t; the caller has checked that t is a known scalar type.
template <typename Sink>
void read_scalar(Cursor& c, GgufValueType t, const std::string& what, Sink&& sink) {
  switch (t) {
    case GgufValueType::UINT8:
      sink(uint64_t{c.read<uint8_t>(what)});
      return;
    case GgufValueType::UINT16:
      sink(uint64_t{c.read<uint16_t>(what)});
      return;
    case GgufValueType::UINT32:
      sink(uint64_t{c.read<uint32_t>(what)});
      return;
    case GgufValueType::UINT64:
      sink(c.read<uint64_t>(what));
      return;
    case GgufValueType::INT8:
      sink(int64_t{c.read<int8_t>(what)});
      return;
    case GgufValueType::INT16:
      sink(int64_t{c.read<int16_t>(what)});
      return;
    case GgufValueType::INT32:
      sink(int64_t{c.read<int32_t>(what)});
      return;
    case GgufValueType::INT64:
      sink(c.read<int64_t>(what));
      return;
    case GgufValueType::FLOAT32:
      sink(double{c.read<float>(what)});
      return;
    case GgufValueType::FLOAT64:
      sink(c.read<double>(what));
      return;
    case GgufValueType::BOOL: {
      const auto b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + " has bool byte " + std::to_string(b) + " (must be 0 or 1)");
      sink(b == 1);
      return;
    }
    case GgufValueType::STRING:
      sink(c.read_string(what));
      return;
    case GgufValueType::ARRAY:
      break;
  }
  c.fail(what + " has an unexpected value type");  // unreachable for checked types
}

GgufArray read_array(Cursor& c, const std::string& what) {
  const auto raw_type = c.read<uint32_t>(what + " element type");
  if (!is_known_value_type(raw_type))
    c.fail(what + " has unknown array element " + value_type_name(raw_type));
  const auto elem = static_cast<GgufValueType>(raw_type);
  if (elem == GgufValueType::ARRAY) c.fail(what + " is a nested array (arrays of arrays are not supported)");
  const auto count = c.read<uint64_t>(what + " element count");
  c.check_count(count, scalar_size(raw_type), what + " array count");
  GgufArray arr{elem, {}};
  const auto n = static_cast<size_t>(count);
  const std::string elem_what = what + " element";
  auto fill = [&](auto& vec) {
    vec.reserve(n);
    using V = typename std::decay_t<decltype(vec)>::value_type;
    for (size_t i = 0; i < n; ++i)
      read_scalar(c, elem, elem_what, [&](auto v) {
        if constexpr (std::is_same_v<decltype(v), V>) vec.push_back(std::move(v));
      });
  };
  switch (kind_of(elem)) {
    case Kind::Signed:
      fill(arr.values.emplace<std::vector<int64_t>>());
      break;
    case Kind::Unsigned:
      fill(arr.values.emplace<std::vector<uint64_t>>());
      break;
    case Kind::Float:
      fill(arr.values.emplace<std::vector<double>>());
      break;
    case Kind::Bool:
      fill(arr.values.emplace<std::vector<bool>>());
      break;
    case Kind::String:
      fill(arr.values.emplace<std::vector<std::string>>());
      break;
  }
  return arr;
}

GgufEntry read_value(Cursor& c, const std::string& key) {
  const std::string what = "metadata value of " + quote(key);
  const auto raw_type = c.read<uint32_t>(what + " type");
  if (!is_known_value_type(raw_type)) c.fail(what + " has unknown value " + value_type_name(raw_type));
  const auto t = static_cast<GgufValueType>(raw_type);
  GgufEntry entry{t, {}};
  if (t == GgufValueType::ARRAY) {
    entry.value = read_array(c, what);
  } else {
    read_scalar(c, t, what, [&](auto v) { entry.value = std::move(v); });
  }
  return entry;
}

std::string supported_type_list() {
  std::string s;
  for (const TensorTypeInfo& info : kTensorTypes) s += (s.empty() ? "" : ", ") + std::string(info.name);
  return s;
}

struct RawTensor {
  GgufTensor tensor;
  uint64_t bytes = 0;
};

RawTensor read_tensor_info(Cursor& c, uint64_t index) {
  const std::string what = "tensor info #" + std::to_string(index);
  RawTensor raw;
  GgufTensor& t = raw.tensor;
  t.name = c.read_string(what + " name");
  if (t.name.empty()) c.fail(what + " has an empty name");
  const std::string named = "tensor " + quote(t.name);
  const auto n_dims = c.read<uint32_t>(named + " dimension count");
  if (n_dims < 1 || n_dims > 4)
    c.fail(named + " has " + std::to_string(n_dims) + " dimensions (must be 1 to 4)");
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const auto dim = c.read<uint64_t>(named + " dimension");
    if (dim == 0) c.fail(named + " has a zero dimension (shape[" + std::to_string(d) + "] = 0)");
    if (__builtin_mul_overflow(elements, dim, &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      c.fail(named + " element count overflows (shape[" + std::to_string(d) + "] = " + std::to_string(dim) +
             ")");
    t.shape.push_back(dim);
  }
  const auto raw_type = c.read<uint32_t>(named + " type");
  const std::optional<TensorTypeInfo> info = tensor_type_info(raw_type);
  if (!info) {
    if (raw_type < kGgmlTypeNames.size())
      c.fail(named + " has tensor type " + std::string(kGgmlTypeNames[raw_type]) +
             ", which kvtrie does not support (supported: " + supported_type_list() + ")");
    c.fail(named + " has unknown tensor type " + std::to_string(raw_type));
  }
  t.type = info->type;
  if (t.shape[0] % info->block_elements != 0)
    c.fail(named + " row length " + std::to_string(t.shape[0]) + " is not a multiple of the " +
           std::string(info->name) + " block size " + std::to_string(info->block_elements));
  if (__builtin_mul_overflow(elements / info->block_elements, uint64_t{info->block_bytes}, &raw.bytes))
    c.fail(named + " byte size overflows");
  t.offset = c.read<uint64_t>(named + " offset");
  return raw;
}

}  // namespace

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

uint64_t GgufTensor::element_count() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // open() proved the product fits
  return n;
}

uint64_t GgufTensor::rows() const {
  return shape.empty() ? 0 : element_count() / shape[0];
}

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  auto fail = [&](const std::string& problem) -> InputError { return InputError(name + ": " + problem); };

  GgufFile file;
  file.path_ = path;
  file.mapping_ = std::make_unique<Mapping>();
  {
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw fail("not a regular file");
    }
    file.mapping_->size = static_cast<size_t>(st.st_size);
    if (file.mapping_->size > 0) {
      void* addr = mmap(nullptr, file.mapping_->size, PROT_READ, MAP_PRIVATE, fd, 0);
      const int err = errno;
      ::close(fd);
      if (addr == MAP_FAILED) throw fail(std::string("cannot map: ") + std::strerror(err));
      file.mapping_->addr = addr;
    } else {
      ::close(fd);
    }
  }
  const auto* base = static_cast<const uint8_t*>(file.mapping_->addr);
  const uint64_t size = file.mapping_->size;
  Cursor c(base, size, name);

  if (size == 0) c.fail("truncated file: the file is empty");
  c.need(4, "magic");
  if (std::memcmp(base, "GGUF", 4) != 0) c.fail("not a GGUF file (bad magic)");
  c.read<uint32_t>("magic");
  file.version_ = c.read<uint32_t>("version");
  if (file.version_ == 1) c.fail("GGUF version 1 is not supported (only versions 2 and 3)");
  if (file.version_ != 2 && file.version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(file.version_) + " (only versions 2 and 3" +
           (file.version_ > 0xffff ? "; a big-endian file?)" : ")"));
  const auto n_tensors = c.read<uint64_t>("tensor count");
  const auto n_kv = c.read<uint64_t>("metadata count");
  // Smallest possible metadata entry: key length, value type, one byte of value.
  c.check_count(n_kv, 8 + 4 + 1, "metadata count");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key #" + std::to_string(i));
    if (key.empty()) c.fail("metadata key #" + std::to_string(i) + " is empty");
    GgufEntry entry = read_value(c, key);
    if (file.metadata_.contains(key)) c.fail("duplicate metadata key " + quote(key));
    file.metadata_.emplace(std::move(key), std::move(entry));
  }

  if (const GgufEntry* a = file.find("general.alignment")) {
    const std::optional<uint64_t> v = file.get_uint("general.alignment");
    if (!v)
      c.fail("general.alignment must be a non-negative integer, not " +
             value_type_name(static_cast<uint32_t>(a->type)));
    if (!is_power_of_two(*v))
      c.fail("general.alignment " + std::to_string(*v) + " is not a non-zero power of two");
    file.alignment_ = *v;
  } else {
    file.alignment_ = kDefaultAlignment;
  }

  // Smallest possible tensor info: name length, n_dims, one dim, type, offset.
  c.check_count(n_tensors, 8 + 4 + 8 + 4 + 8, "tensor count");
  std::vector<RawTensor> raws;
  raws.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    raws.push_back(read_tensor_info(c, i));
    if (!file.tensor_index_.emplace(raws.back().tensor.name, raws.size() - 1).second)
      c.fail("duplicate tensor name " + quote(raws.back().tensor.name));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t pad = (file.alignment_ - c.pos() % file.alignment_) % file.alignment_;
  uint64_t data_start = 0;
  if (__builtin_add_overflow(c.pos(), pad, &data_start)) c.fail("data section offset overflows");

  for (RawTensor& raw : raws) {
    GgufTensor& t = raw.tensor;
    const std::string named = "tensor " + quote(t.name);
    if (t.offset % file.alignment_ != 0)
      c.fail(named + " offset " + std::to_string(t.offset) + " is misaligned (alignment " +
             std::to_string(file.alignment_) + ")");
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_start, t.offset, &begin) ||
        __builtin_add_overflow(begin, raw.bytes, &end) || end > size)
      c.fail(named + " data (offset " + std::to_string(t.offset) + ", " + std::to_string(raw.bytes) +
             " bytes) extends past the end of the file (truncated or corrupt)");
    t.data = std::span<const uint8_t>(base + begin, static_cast<size_t>(raw.bytes));
  }

  std::vector<const RawTensor*> by_offset;
  by_offset.reserve(raws.size());
  for (const RawTensor& raw : raws) by_offset.push_back(&raw);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const RawTensor* a, const RawTensor* b) { return a->tensor.offset < b->tensor.offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const RawTensor& prev = *by_offset[i - 1];
    const RawTensor& next = *by_offset[i];
    if (prev.tensor.offset + prev.bytes > next.tensor.offset)  // no overflow: both ends are within the file
      c.fail("tensors " + quote(prev.tensor.name) + " and " + quote(next.tensor.name) + " overlap");
  }

  file.tensors_.reserve(raws.size());
  for (RawTensor& raw : raws) file.tensors_.push_back(std::move(raw.tensor));
  return file;
}

const GgufEntry* GgufFile::find(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufEntry* e = find(key);
  if (!e) return std::nullopt;
  if (const auto* u = std::get_if<uint64_t>(&e->value)) return *u;
  if (const auto* i = std::get_if<int64_t>(&e->value); i && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufEntry* e = find(key);
  if (!e) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&e->value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&e->value);
      u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(*u);
  return std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufEntry* e = find(key);
  if (!e) return std::nullopt;
  if (const auto* d = std::get_if<double>(&e->value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&e->value)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&e->value)) return static_cast<double>(*u);
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufEntry* e = find(key);
  if (!e) return std::nullopt;
  if (const auto* b = std::get_if<bool>(&e->value)) return *b;
  return std::nullopt;
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const GgufEntry* e = find(key);
  if (!e) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&e->value)) return std::string_view(*s);
  return std::nullopt;
}

const std::vector<std::string>* GgufFile::get_string_array(std::string_view key) const {
  const GgufEntry* e = find(key);
  if (!e) return nullptr;
  if (const auto* a = std::get_if<GgufArray>(&e->value))
    return std::get_if<std::vector<std::string>>(&a->values);
  return nullptr;
}

std::optional<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  const GgufEntry* e = find(key);
  const auto* a = e ? std::get_if<GgufArray>(&e->value) : nullptr;
  if (!a) return std::nullopt;
  if (const auto* d = std::get_if<std::vector<double>>(&a->values)) return *d;
  if (const auto* i = std::get_if<std::vector<int64_t>>(&a->values))
    return std::vector<double>(i->begin(), i->end());
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&a->values))
    return std::vector<double>(u->begin(), u->end());
  return std::nullopt;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufEntry* e = find(key);
  const auto* a = e ? std::get_if<GgufArray>(&e->value) : nullptr;
  if (!a) return std::nullopt;
  if (const auto* i = std::get_if<std::vector<int64_t>>(&a->values)) return *i;
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&a->values)) {
    std::vector<int64_t> out;
    out.reserve(u->size());
    for (uint64_t v : *u) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      out.push_back(static_cast<int64_t>(v));
    }
    return out;
  }
  return std::nullopt;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace kvtrie
