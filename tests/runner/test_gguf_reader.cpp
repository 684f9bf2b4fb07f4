// GgufWriter -> GgufFile round trips: every metadata type, every tensor type, alignment and layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "base/error.h"
#include "runner/model/gguf_file.h"
#include "runner/model/gguf_writer.h"
#include "tests/support/paths.h"

namespace kvtrie {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

std::filesystem::path write_bytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::filesystem::path path = test::scratch_dir() / name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

GgufWriter every_metadata_type() {
  GgufWriter w;
  w.set_u8("t.u8", 255);
  w.set_i8("t.i8", -128);
  w.set_u16("t.u16", 65535);
  w.set_i16("t.i16", -32768);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", std::numeric_limits<int32_t>::min());
  w.set_f32("t.f32", 0.1f);
  w.set_u64("t.u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  w.set_f64("t.f64", 0.1);
  w.set_bool("t.true", true);
  w.set_bool("t.false", false);
  w.set_string("t.str", std::string("h\xc3\xa9llo\0x", 8));
  w.set_string("t.empty", "");
  w.set_array("a.u8", {GgufValueType::UINT8, std::vector<uint64_t>{0, 7, 255}});
  w.set_array("a.i8", {GgufValueType::INT8, std::vector<int64_t>{-128, 0, 127}});
  w.set_array("a.u16", {GgufValueType::UINT16, std::vector<uint64_t>{1, 65535}});
  w.set_array("a.i16", {GgufValueType::INT16, std::vector<int64_t>{-32768, 32767}});
  w.set_array("a.u32", {GgufValueType::UINT32, std::vector<uint64_t>{4000000000u}});
  w.set_i32_array("a.i32", {-5, 0, 5});
  w.set_f32_array("a.f32", {0.5, -2.25, 1e-3f});
  w.set_array("a.u64", {GgufValueType::UINT64, std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()}});
  w.set_array("a.i64", {GgufValueType::INT64, std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 9}});
  w.set_array("a.f64", {GgufValueType::FLOAT64, std::vector<double>{0.1, -1e300}});
  w.set_array("a.bool", {GgufValueType::BOOL, std::vector<bool>{true, false, true}});
  w.set_string_array("a.str", {"", "a", std::string("\0b", 2), "\xe2\x82\xac"});
  w.set_array("a.empty", {GgufValueType::UINT32, std::vector<uint64_t>{}});
  return w;
}

TEST(GgufReader, RoundTripsEveryMetadataTypeWithItsStoredType) {
  const GgufWriter w = every_metadata_type();
  const GgufFile f = GgufFile::open(write_bytes(w.to_bytes(), "meta.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 0u);
  ASSERT_EQ(f.metadata().size(), w.metadata().size());
  for (const auto& [key, entry] : w.metadata()) {
    const GgufEntry* got = f.find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(got->type, entry.type) << key;
    if (entry.type == GgufValueType::FLOAT32) {
      // float32 values come back as the exact double of the stored float.
      EXPECT_EQ(std::get<double>(got->value),
                static_cast<double>(static_cast<float>(std::get<double>(entry.value))));
    } else if (entry.type == GgufValueType::ARRAY &&
               std::get<GgufArray>(entry.value).element_type == GgufValueType::FLOAT32) {
      const auto& want = std::get<std::vector<double>>(std::get<GgufArray>(entry.value).values);
      const auto& have = std::get<std::vector<double>>(std::get<GgufArray>(got->value).values);
      ASSERT_EQ(want.size(), have.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(have[i], static_cast<double>(static_cast<float>(want[i])));
    } else if (entry.type == GgufValueType::ARRAY) {
      const auto& want = std::get<GgufArray>(entry.value);
      const auto& have = std::get<GgufArray>(got->value);
      EXPECT_EQ(have.element_type, want.element_type) << key;
      EXPECT_EQ(have.values, want.values) << key;
      EXPECT_EQ(have.size(), want.size()) << key;
    } else {
      EXPECT_EQ(got->value, entry.value) << key;
    }
  }
}

TEST(GgufReader, TypedGettersConvertOnlyWhenTheValueFits) {
  const GgufFile f = GgufFile::open(write_bytes(every_metadata_type().to_bytes(), "getters.gguf"));
  EXPECT_EQ(f.get_uint("t.u8"), 255u);
  EXPECT_EQ(f.get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_uint("t.i8"), std::nullopt);  // negative
  EXPECT_EQ(f.get_int("t.i8"), -128);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000);
  EXPECT_EQ(f.get_int("t.u64"), std::nullopt);  // does not fit int64
  EXPECT_EQ(f.get_float("t.f64"), 0.1);
  EXPECT_EQ(f.get_float("t.i16"), -32768.0);
  EXPECT_EQ(f.get_float("t.str"), std::nullopt);
  EXPECT_EQ(f.get_bool("t.true"), true);
  EXPECT_EQ(f.get_bool("t.false"), false);
  EXPECT_EQ(f.get_bool("t.u8"), std::nullopt);
  EXPECT_EQ(f.get_string("t.str"), std::string_view("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f.get_string("t.empty"), "");
  EXPECT_EQ(f.get_string("t.u8"), std::nullopt);
  EXPECT_EQ(f.get_uint("no.such.key"), std::nullopt);
  ASSERT_NE(f.get_string_array("a.str"), nullptr);
  EXPECT_EQ(f.get_string_array("a.str")->at(2), std::string("\0b", 2));
  EXPECT_EQ(f.get_string_array("a.i32"), nullptr);
  EXPECT_EQ(f.get_int_array("a.i32"), (std::vector<int64_t>{-5, 0, 5}));
  EXPECT_EQ(f.get_int_array("a.u8"), (std::vector<int64_t>{0, 7, 255}));
  EXPECT_EQ(f.get_int_array("a.u64"), std::nullopt);  // does not fit int64
  EXPECT_EQ(f.get_float_array("a.i32"), (std::vector<double>{-5, 0, 5}));
  EXPECT_EQ(f.get_float_array("a.f32"), (std::vector<double>{0.5, -2.25, static_cast<double>(1e-3f)}));
  EXPECT_EQ(f.get_float_array("a.str"), std::nullopt);
  EXPECT_EQ(f.get_float_array("t.f32"), std::nullopt);  // a scalar is not an array
}

TEST(GgufReader, RoundTripsEveryTensorTypeByteForByte) {
  for (uint32_t alignment : {1u, 32u, 64u, 4096u}) {
    GgufWriter w;
    w.set_alignment(alignment);
    std::vector<std::vector<uint8_t>> datas;
    uint32_t seed = 1;
    for (const TensorTypeInfo& info : kTensorTypes) {
      // Odd row counts and extra dimensions so sizes are rarely multiples of the alignment.
      const std::vector<uint64_t> shape = {info.block_elements * 3ull, 5, seed % 2 ? 1ull : 3ull};
      const uint64_t bytes = row_bytes(info.type, shape[0]) * shape[1] * shape[2];
      datas.push_back(random_bytes(bytes, seed++));
      w.add_tensor("t." + std::string(info.name), info.type, shape, datas.back());
    }
    w.add_tensor("t.1d", TensorType::F32, {7}, random_bytes(28, 99));
    w.add_tensor("t.4d", TensorType::F16, {3, 2, 5, 7}, random_bytes(3 * 2 * 5 * 7 * 2, 100));
    const auto path = write_bytes(w.to_bytes(), "tensors" + std::to_string(alignment) + ".gguf");
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.alignment(), alignment);
    ASSERT_EQ(f.tensors().size(), w.tensors().size());
    const uint8_t* file_start = nullptr;
    for (size_t i = 0; i < w.tensors().size(); ++i) {
      const GgufWriter::Tensor& want = w.tensors()[i];
      const GgufTensor& got = f.tensors()[i];
      SCOPED_TRACE(want.name);
      EXPECT_EQ(got.name, want.name);
      EXPECT_EQ(got.type, want.type);
      EXPECT_EQ(got.shape, want.shape);
      EXPECT_EQ(got.offset, want.offset);
      EXPECT_EQ(got.offset % alignment, 0u);
      ASSERT_EQ(got.data.size(), want.bytes);
      EXPECT_TRUE(std::equal(got.data.begin(), got.data.end(), want.data->begin()));
      uint64_t elements = 1;
      for (uint64_t d : want.shape) elements *= d;
      EXPECT_EQ(got.element_count(), elements);
      EXPECT_EQ(got.rows(), elements / want.shape[0]);
      if (i == 0) file_start = got.data.data() - got.offset - w.header_bytes().size();
      EXPECT_EQ(got.data.data(), file_start + w.header_bytes().size() + want.offset);
      EXPECT_EQ(f.find_tensor(want.name), &got);
    }
    EXPECT_EQ(f.find_tensor("absent"), nullptr);
    EXPECT_EQ(std::filesystem::file_size(path), w.file_size());
  }
}

TEST(GgufReader, AcceptsVersion2) {
  GgufWriter w = every_metadata_type();
  w.add_tensor("x", TensorType::Q8_0, {32, 2}, random_bytes(68, 3));
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes[4] = 2;  // version field; v2 and v3 share the little-endian layout
  const GgufFile f = GgufFile::open(write_bytes(bytes, "v2.gguf"));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_string("t.str"), std::string_view("h\xc3\xa9llo\0x", 8));
  ASSERT_NE(f.find_tensor("x"), nullptr);
  EXPECT_EQ(f.find_tensor("x")->data[67], bytes[w.header_bytes().size() + 67]);
}

TEST(GgufReader, MovedFileKeepsTensorDataValid) {
  GgufWriter w;
  const std::vector<uint8_t> data = random_bytes(64 * 4, 5);
  w.add_tensor("w", TensorType::F32, {64}, data);
  GgufFile a = GgufFile::open(write_bytes(w.to_bytes(), "move.gguf"));
  const uint8_t* before = a.tensors()[0].data.data();
  GgufFile b = std::move(a);
  EXPECT_EQ(b.tensors()[0].data.data(), before);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), b.tensors()[0].data.begin()));
  EXPECT_EQ(b.path().filename(), "move.gguf");
}

TEST(GgufWriter, StreamsTensorsFromSeveralThreadsAndWritesSparseFiles) {
  GgufWriter w;
  w.set_string("general.architecture", "none");
  for (int i = 0; i < 9; ++i) w.add_tensor("t" + std::to_string(i), TensorType::Q4_0, {64, 3ull + i});
  const auto path = test::scratch_dir() / "streamed.gguf";
  w.write(
      path,
      [&](size_t index, GgufTensorSink& sink) {
        // Two writes per tensor: sinks append in order.
        const std::vector<uint8_t> bytes = random_bytes(sink.size(), static_cast<uint32_t>(index));
        sink.write(std::span(bytes).first(10));
        sink.write(std::span(bytes).subspan(10));
      },
      4);
  const GgufFile f = GgufFile::open(path);
  ASSERT_EQ(f.tensors().size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    const std::vector<uint8_t> want = random_bytes(f.tensors()[i].data.size(), static_cast<uint32_t>(i));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), f.tensors()[i].data.begin())) << i;
  }
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial"));

  const auto sparse = test::scratch_dir() / "sparse.gguf";
  w.write(sparse, {}, 1, /*sparse=*/true);
  const GgufFile s = GgufFile::open(sparse);
  for (const GgufTensor& t : s.tensors())
    EXPECT_TRUE(std::all_of(t.data.begin(), t.data.end(), [](uint8_t b) { return b == 0; }));

  // A fill that writes too little fails and leaves no file behind.
  const auto bad = test::scratch_dir() / "short.gguf";
  EXPECT_THROW(w.write(
                   bad, [](size_t, GgufTensorSink&) {}, 2),
               Error);
  EXPECT_FALSE(std::filesystem::exists(bad));
  EXPECT_FALSE(std::filesystem::exists(bad.string() + ".partial"));
}

TEST(GgufWriter, RefusesValuesThatDoNotMatchTheirType) {
  GgufWriter w;
  EXPECT_THROW(w.set("k", {GgufValueType::UINT8, uint64_t{256}}), Error);
  EXPECT_THROW(w.set("k", {GgufValueType::INT32, uint64_t{1}}), Error);
  EXPECT_THROW(w.set("k", {GgufValueType::ARRAY, GgufArray{GgufValueType::ARRAY, std::vector<uint64_t>{}}}),
               Error);
  EXPECT_THROW(w.add_tensor("q", TensorType::Q4_K, {128, 2}), Error);  // 128 is not a whole 256-block
  EXPECT_THROW(w.add_tensor("d", TensorType::F32, {4}, std::vector<uint8_t>(15)), Error);
  EXPECT_TRUE(w.metadata().empty());
}

TEST(GgufReader, ReadsRealVocabFile) {
  KVTRIE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  const GgufFile f = GgufFile::open(test::shared_dir() / "vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  ASSERT_NE(f.get_string_array("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 32000u);
}

}  // namespace
}  // namespace kvtrie
