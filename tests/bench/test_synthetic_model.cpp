// The synthetic-model writer: every preset loads through GgufFile + ModelConfig + ModelWeights with its
// intended shape, weights are deterministic and plausibly distributed, the built-in and copied vocabularies,
// and the kvtrie-synth command line.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include "base/error.h"
#include "bench/synthetic/synthetic_model.h"
#include "runner/model/model_config.h"
#include "runner/model/quantization.h"
#include "runner/tokenizer/tokenizer.h"
#include "tests/support/paths.h"

namespace kvtrie {
namespace {

std::vector<uint8_t> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> dequantize(const GgufTensor& t) {
  std::vector<float> out(t.element_count());
  const uint64_t row = t.shape[0], bytes = row_bytes(t.type, row);
  for (uint64_t r = 0; r < t.rows(); ++r)
    dequantize_row(t.type, t.data.data() + r * bytes, out.data() + r * row, row);
  return out;
}

void expect_loads_as(const std::filesystem::path& path, const synth::ModelShape& s, TensorType type) {
  const GgufFile file = GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.arch_name, s.arch);
  EXPECT_EQ(c.n_layers, s.n_layers);
  EXPECT_EQ(c.n_embd, s.n_embd);
  EXPECT_EQ(c.n_heads, s.n_heads);
  EXPECT_EQ(c.n_kv_heads, s.n_kv_heads);
  EXPECT_EQ(c.head_dim_k, s.head_dim_or_default());
  EXPECT_EQ(c.n_ff, s.n_ff);
  EXPECT_EQ(c.n_vocab, s.n_vocab);
  EXPECT_EQ(c.n_ctx_train, s.n_ctx);
  EXPECT_FLOAT_EQ(c.rope_freq_base, s.rope_freq_base);
  EXPECT_EQ(c.tied_output, s.tied_output);
  EXPECT_EQ(c.has_qkv_bias, s.qkv_bias);
  EXPECT_EQ(c.has_qk_norm, s.qk_norm);
  EXPECT_EQ(c.has_rope_freqs, s.llama3_rope_freqs);
  const ModelWeights w = ModelWeights::from_gguf(file, c);
  ASSERT_EQ(w.layers.size(), s.n_layers);
  EXPECT_EQ(w.token_embd->type, synth::matrix_type(type, s.n_embd));
  EXPECT_EQ(w.layers[0].w_down->type, synth::matrix_type(type, s.n_ff));
  EXPECT_EQ(w.layers[0].attn_norm->type, TensorType::F32);
}

TEST(SyntheticModel, TinyPresetsLoadInEveryTensorType) {
  for (const char* name : {"tiny", "tiny-qwen2", "tiny-qwen3"}) {
    for (const TensorTypeInfo& info : kTensorTypes) {
      SCOPED_TRACE(std::string(name) + " " + std::string(info.name));
      const synth::ModelShape s = *synth::preset(name, info.type);
      // Tiny presets pick widths whose rows are whole blocks: no fallback type is ever needed.
      EXPECT_EQ(synth::matrix_type(info.type, s.n_embd), info.type);
      EXPECT_EQ(synth::matrix_type(info.type, s.n_ff), info.type);
      EXPECT_EQ(synth::matrix_type(info.type, uint64_t{s.n_heads} * s.head_dim_or_default()), info.type);
      const auto path = synth::write_preset(test::scratch_dir() / "m.gguf", name, info.type, 7);
      EXPECT_LT(std::filesystem::file_size(path), 5u << 20);
      expect_loads_as(path, s, info.type);
    }
  }
}

TEST(SyntheticModel, SameSeedSameBytesWhateverTheThreadCount) {
  synth::SynthOptions o;
  o.shape = *synth::preset("tiny-qwen2", TensorType::Q4_1);
  o.type = TensorType::Q4_1;
  o.seed = 42;
  o.threads = 1;
  synth::write_model(test::scratch_dir() / "a.gguf", o);
  o.threads = 5;
  synth::write_model(test::scratch_dir() / "b.gguf", o);
  o.seed = 43;
  synth::write_model(test::scratch_dir() / "c.gguf", o);
  const auto a = read_all(test::scratch_dir() / "a.gguf");
  EXPECT_EQ(a, read_all(test::scratch_dir() / "b.gguf"));
  const auto c = read_all(test::scratch_dir() / "c.gguf");
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(SyntheticModel, WeightsLookLikeSmallGaussiansAndNormsLikeOnes) {
  const auto path = synth::write_preset(test::scratch_dir() / "m.gguf", "tiny-qwen2", TensorType::F32, 3);
  const GgufFile file = GgufFile::open(path);
  auto stats = [&](const std::string& name) {
    const std::vector<float> v = dequantize(*file.find_tensor(name));
    double sum = 0, sq = 0;
    for (float x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    for (float x : v) sq += (x - mean) * (x - mean);
    return std::pair(mean, std::sqrt(sq / static_cast<double>(v.size())));
  };
  const auto [m_mean, m_std] = stats("blk.1.ffn_up.weight");
  EXPECT_NEAR(m_mean, 0.0, 0.002);
  EXPECT_NEAR(m_std, 0.02, 0.002);
  const auto [n_mean, n_std] = stats("blk.0.attn_norm.weight");
  EXPECT_NEAR(n_mean, 1.0, 0.01);
  EXPECT_GT(n_std, 0.005);
  const auto [b_mean, b_std] = stats("blk.0.attn_q.bias");
  EXPECT_NEAR(b_mean, 0.0, 0.01);
  EXPECT_NEAR(b_std, 0.02, 0.006);
  // Different tensors get different streams.
  EXPECT_NE(dequantize(*file.find_tensor("blk.0.ffn_up.weight")),
            dequantize(*file.find_tensor("blk.1.ffn_up.weight")));
}

TEST(SyntheticModel, BuiltInVocabIsByteLevelSentencePiece) {
  const auto path = synth::write_preset(test::scratch_dir() / "m.gguf", "tiny", TensorType::Q8_0);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  const std::vector<std::string>& tokens = *f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 320u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[3 + 0xa7], "<0xA7>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(tokens[259], "\xE2\x96\x81");  // the word-boundary piece
  EXPECT_EQ(tokens[260], "<unused_0>");
  EXPECT_EQ(tokens[319], "<unused_59>");
  const std::vector<int64_t> types = *f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 320u);
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[100], 6);
  EXPECT_EQ(types[300], 5);
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 320u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.unknown_token_id"), 0u);
}

// Regression: the built-in vocab had no U+2581 piece, so SentencePiece byte-encoded word boundaries and
// detokenize(tokenize("Once upon a time")) came back as "▁Once▁upon▁a▁time".
TEST(SyntheticModel, BuiltInVocabRoundTripsTextWithSpaces) {
  const auto path = synth::write_preset(test::scratch_dir() / "vocab-roundtrip.gguf", "tiny");
  const GgufFile f = GgufFile::open(path);
  const auto tokenizer = Tokenizer::from_gguf(f);
  const std::string text = "Once upon a time, a cat said: \"héllo\"!";
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, false, false)), text);
}

TEST(SyntheticModel, VocabFromCopiesEveryTokenizerKey) {
  KVTRIE_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  const auto vocab_path = test::shared_dir() / "vocab/ggml-vocab-llama-spm.gguf";
  synth::SynthOptions o;
  o.shape = *synth::preset("tiny", TensorType::Q4_0);
  o.type = TensorType::Q4_0;
  o.vocab_from = vocab_path;
  const auto path = test::scratch_dir() / "m.gguf";
  synth::write_model(path, o);
  const GgufFile vocab = GgufFile::open(vocab_path);
  const GgufFile model = GgufFile::open(path);
  int copied = 0;
  for (const auto& [key, entry] : vocab.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    ++copied;
    ASSERT_NE(model.find(key), nullptr) << key;
    EXPECT_EQ(*model.find(key), entry) << key;
  }
  EXPECT_GE(copied, 5);
  o.shape.n_vocab = 32000;
  expect_loads_as(path, o.shape, TensorType::Q4_0);
}

TEST(SyntheticModel, VocabFromAFileWithoutTokensIsRefused) {
  const auto not_vocab = synth::write_preset(test::scratch_dir() / "v.gguf", "tiny", TensorType::F32);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.write(not_vocab);
  synth::SynthOptions o;
  o.shape = *synth::preset("tiny", TensorType::F32);
  o.vocab_from = not_vocab;
  EXPECT_THROW(synth::write_model(test::scratch_dir() / "m.gguf", o), InputError);
}

// The real shapes, checked without writing gigabytes: skeleton files are sparse (zero weights).
TEST(SyntheticModel, RealPresetsHaveTheirPublishedShapes) {
  struct Case {
    const char* name;
    TensorType type;
    uint32_t embd, layers, heads, kv_heads, head_dim, ff, vocab;
  };
  for (const Case& k : {Case{"llama3-1b", TensorType::Q4_0, 2048, 16, 32, 8, 64, 8192, 128256},
                        Case{"llama3-8b", TensorType::Q8_0, 4096, 32, 32, 8, 128, 14336, 128256},
                        Case{"qwen2-0.5b", TensorType::Q4_K, 896, 24, 14, 2, 64, 4864, 151936},
                        Case{"qwen3-0.6b", TensorType::Q6_K, 1024, 28, 16, 8, 128, 3072, 151936}}) {
    SCOPED_TRACE(k.name);
    const synth::ModelShape s = *synth::preset(k.name, k.type);
    EXPECT_EQ(s.n_embd, k.embd);
    EXPECT_EQ(s.n_layers, k.layers);
    EXPECT_EQ(s.n_heads, k.heads);
    EXPECT_EQ(s.n_kv_heads, k.kv_heads);
    EXPECT_EQ(s.head_dim_or_default(), k.head_dim);
    EXPECT_EQ(s.n_ff, k.ff);
    EXPECT_EQ(s.n_vocab, k.vocab);
    synth::SynthOptions o;
    o.shape = s;
    o.type = k.type;
    o.skeleton = true;
    const auto path = test::scratch_dir() / "skeleton.gguf";
    synth::write_model(path, o);
    expect_loads_as(path, s, k.type);
    std::filesystem::remove(path);
  }
  EXPECT_TRUE(synth::preset("llama3-1b", TensorType::F16)->llama3_rope_freqs);
  EXPECT_TRUE(synth::preset("llama3-1b", TensorType::F16)->tied_output);
  EXPECT_FALSE(synth::preset("llama3-8b", TensorType::F16)->tied_output);
  EXPECT_TRUE(synth::preset("qwen2-0.5b", TensorType::F16)->qkv_bias);
  EXPECT_TRUE(synth::preset("qwen3-0.6b", TensorType::F16)->qk_norm);
  EXPECT_FALSE(synth::preset("llama4", TensorType::F16).has_value());
}

TEST(SyntheticModel, RowsThatAreNotWholeBlocksFallBackToA32BlockType) {
  EXPECT_EQ(synth::matrix_type(TensorType::Q4_K, 2048), TensorType::Q4_K);
  EXPECT_EQ(synth::matrix_type(TensorType::Q4_K, 896), TensorType::Q4_0);
  EXPECT_EQ(synth::matrix_type(TensorType::Q5_K, 896), TensorType::Q5_0);
  EXPECT_EQ(synth::matrix_type(TensorType::Q6_K, 896), TensorType::Q8_0);
  EXPECT_EQ(synth::matrix_type(TensorType::Q8_0, 48), TensorType::F16);
  EXPECT_EQ(synth::matrix_type(TensorType::F32, 7), TensorType::F32);
}

TEST(SyntheticModel, Llama3RopeFactorsSpanOneToThirtyTwo) {
  synth::SynthOptions o;
  o.shape = *synth::preset("tiny", TensorType::F32);
  o.shape.n_heads = o.shape.n_kv_heads = 1;  // head_dim 64, like llama3-1b
  o.shape.rope_freq_base = 500000.0f;
  o.shape.llama3_rope_freqs = true;
  const auto path = test::scratch_dir() / "m.gguf";
  synth::write_model(path, o);
  const GgufFile f = GgufFile::open(path);
  const std::vector<float> r = dequantize(*f.find_tensor("rope_freqs.weight"));
  ASSERT_EQ(r.size(), 32u);
  EXPECT_FLOAT_EQ(r.front(), 1.0f);  // highest frequency: unchanged
  EXPECT_FLOAT_EQ(r.back(), 32.0f);  // lowest frequency: slowed by the full factor
  EXPECT_TRUE(std::is_sorted(r.begin(), r.end()));
  EXPECT_TRUE(
      std::any_of(r.begin(), r.end(), [](float x) { return x > 1.0f && x < 32.0f; }));  // the smooth band
  EXPECT_TRUE(ModelConfig::from_gguf(f).has_rope_freqs);
}

std::pair<int, std::string> run_synth(const std::string& args) {
  const std::string cmd = std::string(KVTRIE_BINARY_DIR) + "/bench/kvtrie-synth " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 256> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  const int status = pclose(pipe.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(SyntheticModel, CommandLineWritesTheRequestedModel) {
  const auto path = test::scratch_dir() / "cli.gguf";
  const auto [rc, out] =
      run_synth("--preset tiny-qwen3 --type Q5_1 --seed 9 --layers 3 --ctx 512 -o " + path.string());
  ASSERT_EQ(rc, 0) << out;
  synth::ModelShape s = *synth::preset("tiny-qwen3", TensorType::Q5_1);
  s.n_layers = 3;
  s.n_ctx = 512;
  expect_loads_as(path, s, TensorType::Q5_1);
  synth::SynthOptions o;  // the library with the same options writes the same bytes
  o.shape = s;
  o.type = TensorType::Q5_1;
  o.seed = 9;
  synth::write_model(test::scratch_dir() / "lib.gguf", o);
  EXPECT_EQ(read_all(path), read_all(test::scratch_dir() / "lib.gguf"));
  EXPECT_NE(run_synth("--preset nope -o " + path.string()).first, 0);
  EXPECT_NE(run_synth("--preset tiny --type Q2_K -o " + path.string()).first, 0);
  EXPECT_NE(run_synth("--preset tiny").first, 0);  // -o is required
}

}  // namespace
}  // namespace kvtrie
