// Corrupt, truncated and unsupported GGUF files: each must be refused with one InputError line naming the
// file and the problem, never a crash. CI also runs this file under ASan/UBSan (runner_gguf_corrupt_asan).
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <random>

#include "base/error.h"
#include "runner/model/gguf_file.h"
#include "runner/model/gguf_writer.h"
#include "runner/model/model_config.h"
#include "tests/support/paths.h"

namespace kvtrie {
namespace {

constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();

// Hand-built GGUF bytes, for headers the (well-behaved) writer cannot produce.
class Raw {
 public:
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Raw& tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Raw& pad_and_data(size_t data_bytes, size_t alignment = 32) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, 0);
    bytes_.resize(bytes_.size() + data_bytes, 0x5a);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <typename T>
  Raw& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

std::filesystem::path write_file(const std::vector<uint8_t>& bytes, const std::string& name = "bad.gguf") {
  const std::filesystem::path path = test::scratch_dir() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Opens the file (and, when it opens, reads its model config and weights) and returns the InputError message;
// fails the test when nothing is refused or another exception escapes.
std::string refusal(const std::filesystem::path& path) {
  try {
    const GgufFile file = GgufFile::open(path);
    const ModelConfig config = ModelConfig::from_gguf(file);
    ModelWeights::from_gguf(file, config);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was accepted";
  return {};
}

void expect_refused(const std::vector<uint8_t>& bytes, std::string_view word) {
  const std::filesystem::path path = write_file(bytes);
  const std::string message = refusal(path);
  EXPECT_TRUE(message.starts_with(path.string() + ": ")) << message;
  EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' not in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// A small valid llama model (zero weights) with optional damage: a tensor left out or given a wrong shape.
struct ModelDamage {
  std::string arch = "llama";
  std::string skip_tensor;
  std::string reshape_tensor;
  std::string skip_key;
  uint32_t head_count_kv = 2;
};

template <typename T, typename V>
ModelDamage damage(T ModelDamage::*field, V value) {
  ModelDamage d;
  d.*field = value;
  return d;
}

std::vector<uint8_t> model_bytes(const ModelDamage& d = {}, size_t* header_size = nullptr) {
  GgufWriter w;
  w.set_string("general.architecture", d.arch);
  const std::string a = d.arch + ".";
  const std::vector<std::pair<std::string, uint32_t>> keys = {
      {a + "block_count", 1},          {a + "embedding_length", 32},
      {a + "attention.head_count", 4}, {a + "attention.head_count_kv", d.head_count_kv},
      {a + "feed_forward_length", 64}, {a + "context_length", 128},
      {a + "vocab_size", 40}};
  for (const auto& [k, v] : keys)
    if (k != a + d.skip_key) w.set_u32(k, v);
  auto add = [&](const std::string& name, std::vector<uint64_t> shape) {
    if (name == d.skip_tensor) return;
    if (name == d.reshape_tensor) shape.back() += 1;
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    w.add_tensor(name, TensorType::F32, shape, std::vector<uint8_t>(n * 4, 0));
  };
  add("token_embd.weight", {32, 40});
  add("output_norm.weight", {32});
  add("blk.0.attn_norm.weight", {32});
  add("blk.0.attn_q.weight", {32, 32});
  add("blk.0.attn_k.weight", {32, 16});
  add("blk.0.attn_v.weight", {32, 16});
  add("blk.0.attn_output.weight", {32, 32});
  add("blk.0.ffn_norm.weight", {32});
  add("blk.0.ffn_gate.weight", {32, 64});
  add("blk.0.ffn_up.weight", {32, 64});
  add("blk.0.ffn_down.weight", {64, 32});
  if (header_size) *header_size = w.header_bytes().size();
  return w.to_bytes();
}

TEST(GgufCorrupt, TheUndamagedModelLoads) {
  const GgufFile file = GgufFile::open(write_file(model_bytes(), "good.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.n_vocab, 40u);
  EXPECT_EQ(ModelWeights::from_gguf(file, c).layers.size(), 1u);
}

TEST(GgufCorrupt, TruncationAnywhereIsRefused) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_f32_array("a.f32", {1, 2, 3});
  w.set_string_array("a.str", {"x", "yz"});
  w.set_bool("b", true);
  w.set_u64("n", 7);
  w.add_tensor("t0", TensorType::Q8_0, {64, 3}, std::vector<uint8_t>(3 * 68, 1));
  w.add_tensor("t1", TensorType::F16, {5, 7}, std::vector<uint8_t>(70, 2));
  const std::vector<uint8_t> full = w.to_bytes();
  const size_t header = w.header_bytes().size();
  const size_t data_end = header + w.tensors().back().offset + w.tensors().back().bytes;
  for (size_t len = 0; len < data_end; len += (len < header + 8 ? 1 : 13)) {
    SCOPED_TRACE("truncated to " + std::to_string(len) + " bytes");
    expect_refused(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<ptrdiff_t>(len)),
                   "truncated");
  }
  expect_refused(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<ptrdiff_t>(data_end - 1)),
                 "past the end");
}

TEST(GgufCorrupt, BadMagicAndVersionsAreRefused) {
  std::vector<uint8_t> bytes = Raw().header(3, 0, 0).bytes();
  bytes[3] = 'X';
  expect_refused(bytes, "magic");
  expect_refused(Raw().header(1, 0, 0).bytes(), "version 1");
  expect_refused(Raw().header(4, 0, 0).bytes(), "version 4");
  expect_refused(Raw().header(0x03000000, 0, 0).bytes(), "big-endian");
  expect_refused({}, "empty");
}

TEST(GgufCorrupt, HugeLengthsAndCountsAreRefusedWithoutAllocating) {
  expect_refused(Raw().header(3, 0, kHuge).bytes(), "metadata count");
  expect_refused(Raw().header(3, kHuge, 0).bytes(), "tensor count");
  expect_refused(Raw().header(3, uint64_t{1} << 40, 0).u64(5).bytes(), "tensor count");
  expect_refused(Raw().header(3, 0, 1).u64(kHuge).pad_and_data(64).bytes(), "key #0 length");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(8).u64(uint64_t{1} << 62).bytes(), "length");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(9).u32(4).u64(kHuge / 2).bytes(), "array count");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(9).u32(8).u64(uint64_t{1} << 60).u64(0).bytes(),
                 "array count");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(9).u32(8).u64(2).str("a").u64(kHuge).bytes(), "length");
  expect_refused(Raw().header(3, 1, 0).u64(kHuge).pad_and_data(64).bytes(), "name length");
}

TEST(GgufCorrupt, BadMetadataIsRefused) {
  expect_refused(Raw().header(3, 0, 1).str("k").u32(13).u32(0).bytes(), "unknown value type 13");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(9).u32(77).u64(0).bytes(),
                 "unknown array element type 77");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(9).u32(9).u64(1).u32(4).u64(0).bytes(), "nested array");
  expect_refused(Raw().header(3, 0, 1).str("k").u32(7).u8(2).bytes(), "bool");
  expect_refused(Raw().header(3, 0, 1).str("").u32(4).u32(1).bytes(), "empty");
  expect_refused(Raw().header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes(), "duplicate metadata key 'k'");
  expect_refused(Raw().header(3, 0, 1).str("k\n").u32(7).u8(2).bytes(), "'k\\x0a'");  // stays one line
}

TEST(GgufCorrupt, BadAlignmentIsRefused) {
  for (uint32_t a : {0u, 3u, 48u, 1000u}) {
    SCOPED_TRACE(a);
    expect_refused(Raw().header(3, 0, 1).kv_u32("general.alignment", a).bytes(), "power of two");
  }
  expect_refused(Raw().header(3, 0, 1).str("general.alignment").u32(8).str("32").bytes(),
                 "general.alignment");
  expect_refused(Raw().header(3, 0, 1).str("general.alignment").u32(5).u32(0xffffffffu).bytes(),
                 "general.alignment");
}

TEST(GgufCorrupt, BadTensorInfosAreRefused) {
  auto one = [](const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset, size_t data = 4096) {
    return Raw().header(3, 1, 0).tensor("w", dims, type, offset).pad_and_data(data).bytes();
  };
  expect_refused(one({32}, 99, 0), "unknown tensor type 99");
  expect_refused(one({256}, 10, 0), "Q2_K");  // a real GGML type kvtrie does not support
  expect_refused(one({32}, 16, 0), "IQ2_XXS");
  expect_refused(one({}, 0, 0), "0 dimensions");
  expect_refused(one({1, 1, 1, 1, 1}, 0, 0), "5 dimensions");
  expect_refused(one({32, 0}, 0, 0), "zero dimension");
  expect_refused(one({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0), "overflows");
  expect_refused(one({uint64_t{1} << 32, uint64_t{1} << 31}, 0, 0), "overflows");  // 2^63 > INT64_MAX
  expect_refused(one({uint64_t{1} << 60, 4}, 0, 0),
                 "byte size overflows");  // 2^62 elements fit, bytes do not
  expect_refused(one({48}, 2, 0), "block size 32");
  expect_refused(one({128}, 12, 0), "block size 256");
  expect_refused(one({8}, 0, 4), "misaligned");
  expect_refused(one({8}, 0, uint64_t{1} << 40), "past the end");
  expect_refused(one({8}, 0, kHuge - 31), "past the end");  // offset + size overflows
  expect_refused(one({2048}, 0, 0), "past the end");        // 8 KiB of data in a 4 KiB section
  expect_refused(Raw().header(3, 1, 0).tensor("", {8}, 0, 0).pad_and_data(64).bytes(), "empty name");
}

TEST(GgufCorrupt, OverlappingAndDuplicateTensorsAreRefused) {
  expect_refused(
      Raw().header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad_and_data(128).bytes(),
      "tensors 'a' and 'b' overlap");
  expect_refused(
      Raw().header(3, 2, 0).tensor("a", {16}, 0, 64).tensor("b", {32}, 0, 0).pad_and_data(256).bytes(),
      "tensors 'b' and 'a' overlap");
  expect_refused(
      Raw().header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_and_data(64).bytes(),
      "duplicate tensor name 'a'");
  // Adjacent tensors (the first ends exactly where the second starts) are fine.
  const auto ok = write_file(
      Raw().header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 32).pad_and_data(64).bytes(),
      "adjacent.gguf");
  EXPECT_EQ(GgufFile::open(ok).tensors().size(), 2u);
}

TEST(GgufCorrupt, UnreadablePathsAreRefused) {
  const auto missing = test::scratch_dir() / "does-not-exist.gguf";
  EXPECT_NE(refusal(missing).find(missing.string() + ": cannot open"), std::string::npos);
  EXPECT_NE(refusal(test::scratch_dir()).find("not a regular file"), std::string::npos);
}

TEST(GgufCorrupt, BadModelsAreRefused) {
  expect_refused(model_bytes(damage(&ModelDamage::arch, "mamba")), "unsupported architecture 'mamba'");
  expect_refused(model_bytes(damage(&ModelDamage::skip_tensor, "blk.0.ffn_up.weight")),
                 "missing tensor blk.0.ffn_up.weight");
  expect_refused(model_bytes(damage(&ModelDamage::skip_tensor, "output_norm.weight")),
                 "missing tensor output_norm.weight");
  expect_refused(model_bytes(damage(&ModelDamage::reshape_tensor, "blk.0.attn_k.weight")),
                 "blk.0.attn_k.weight has the wrong shape");
  expect_refused(model_bytes(damage(&ModelDamage::reshape_tensor, "token_embd.weight")),
                 "token_embd.weight has the wrong shape");
  expect_refused(model_bytes(damage(&ModelDamage::reshape_tensor, "blk.0.ffn_norm.weight")),
                 "ffn_norm.weight has the wrong shape");
  expect_refused(model_bytes(damage(&ModelDamage::skip_key, "block_count")), "llama.block_count");
  expect_refused(model_bytes(damage(&ModelDamage::skip_key, "embedding_length")), "llama.embedding_length");
  expect_refused(model_bytes(damage(&ModelDamage::head_count_kv, 3)), "head_count_kv");
  expect_refused(Raw().header(3, 0, 0).bytes(), "general.architecture");
}

// Seeded random damage to a valid model: every result is either a loaded model or an InputError, never a
// crash (this is what the sanitizer build is for).
TEST(GgufCorrupt, RandomByteDamageNeverCrashes) {
  size_t header = 0;
  const std::vector<uint8_t> good = model_bytes({}, &header);
  std::mt19937 rng(12345);
  int refused = 0;
  for (int i = 0; i < 400; ++i) {
    std::vector<uint8_t> bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) bytes[rng() % header] = static_cast<uint8_t>(rng());
    const auto path = write_file(bytes);
    try {
      const GgufFile file = GgufFile::open(path);
      const ModelConfig c = ModelConfig::from_gguf(file);
      ModelWeights::from_gguf(file, c);
    } catch (const InputError& e) {
      ++refused;
      EXPECT_TRUE(std::string(e.what()).starts_with(path.string() + ": ")) << e.what();
    }
  }
  EXPECT_GT(refused, 100);  // most damage to the header is detected
}

}  // namespace
}  // namespace kvtrie
