// ModelConfig / ModelWeights from GGUF: the real stories260K model, each architecture's flags and shapes,
// defaults of optional keys and where the vocabulary size comes from.
#include <gtest/gtest.h>

#include "base/error.h"
#include "bench/synthetic/synthetic_model.h"
#include "runner/model/model_config.h"
#include "tests/support/paths.h"

namespace kvtrie {
namespace {

TEST(ModelConfig, Stories260KHasItsPublishedShape) {
  KVTRIE_REQUIRE_SHARED("models/stories260K.gguf");
  const GgufFile file = GgufFile::open(test::shared_dir() / "models/stories260K.gguf");
  const ModelConfig c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.arch, Architecture::Llama);
  EXPECT_EQ(c.arch_name, "llama");
  EXPECT_EQ(c.rope_type, RopeType::Normal);
  EXPECT_EQ(c.n_embd, 64u);
  EXPECT_EQ(c.n_layers, 5u);
  EXPECT_EQ(c.n_heads, 8u);
  EXPECT_EQ(c.n_kv_heads, 4u);
  EXPECT_EQ(c.n_vocab, 512u);
  EXPECT_EQ(c.head_dim_k, 8u);
  EXPECT_EQ(c.head_dim_v, 8u);
  EXPECT_EQ(c.rope_dims, 8u);
  EXPECT_FALSE(c.has_qkv_bias);
  EXPECT_FALSE(c.has_qk_norm);
  const ModelWeights w = ModelWeights::from_gguf(file, c);
  ASSERT_EQ(w.layers.size(), 5u);
  EXPECT_EQ(w.token_embd->shape, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(w.output == w.token_embd, c.tied_output);
  for (const LayerWeights& l : w.layers) {
    EXPECT_EQ(l.wk->shape, (std::vector<uint64_t>{64, 32}));
    EXPECT_EQ(l.w_down->shape, (std::vector<uint64_t>{c.n_ff, 64}));
    EXPECT_EQ(l.bq, nullptr);
    EXPECT_EQ(l.q_norm, nullptr);
  }
}

synth::SynthOptions tiny(std::string_view preset) {
  synth::SynthOptions o;
  o.shape = *synth::preset(preset, TensorType::F32);
  return o;
}

// Writes `w` as a sparse file (zero weights) and opens it.
GgufFile open_written(const GgufWriter& w) {
  const auto path = test::scratch_dir() / "model.gguf";
  w.write(path, {}, 1, /*sparse=*/true);
  return GgufFile::open(path);
}

TEST(ModelConfig, Qwen2UsesNeoxRopeAndQkvBias) {
  const GgufFile file = open_written(synth::make_writer(tiny("tiny-qwen2")));
  const ModelConfig c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.arch, Architecture::Qwen2);
  EXPECT_EQ(c.rope_type, RopeType::Neox);
  EXPECT_TRUE(c.has_qkv_bias);
  EXPECT_TRUE(c.tied_output);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  const ModelWeights w = ModelWeights::from_gguf(file, c);
  EXPECT_EQ(w.output, w.token_embd);
  EXPECT_EQ(w.layers[1].bk->shape, (std::vector<uint64_t>{32}));  // 2 kv heads x 16
  EXPECT_EQ(w.layers[1].bq->shape, (std::vector<uint64_t>{64}));
}

TEST(ModelConfig, Qwen3HeadDimDiffersFromWidthOverHeads) {
  const GgufFile file = open_written(synth::make_writer(tiny("tiny-qwen3")));
  const ModelConfig c = ModelConfig::from_gguf(file);
  EXPECT_EQ(c.arch, Architecture::Qwen3);
  EXPECT_EQ(c.rope_type, RopeType::Neox);
  EXPECT_TRUE(c.has_qk_norm);
  EXPECT_FALSE(c.has_qkv_bias);
  EXPECT_EQ(c.n_embd, 64u);
  EXPECT_EQ(c.head_dim_k, 32u);  // not 64 / 4
  EXPECT_EQ(c.rope_dims, 32u);
  const ModelWeights w = ModelWeights::from_gguf(file, c);
  EXPECT_EQ(w.layers[0].wq->shape, (std::vector<uint64_t>{64, 128}));
  EXPECT_EQ(w.layers[0].wo->shape, (std::vector<uint64_t>{128, 64}));
  EXPECT_EQ(w.layers[0].q_norm->shape, (std::vector<uint64_t>{32}));
}

TEST(ModelConfig, OptionalKeysTakeTheirDefaults) {
  GgufWriter w = synth::make_writer(tiny("tiny"));
  for (const char* key : {"head_count_kv", "key_length", "value_length"})
    ASSERT_TRUE(w.erase(std::string("llama.attention.") + key));
  for (const char* key : {"llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base",
                          "llama.rope.dimension_count", "llama.context_length"})
    ASSERT_TRUE(w.erase(key));
  const ModelConfig c = ModelConfig::from_gguf(open_written(w));
  EXPECT_EQ(c.n_kv_heads, c.n_heads);
  EXPECT_EQ(c.head_dim_k, 16u);
  EXPECT_EQ(c.head_dim_v, 16u);
  EXPECT_EQ(c.rope_dims, 16u);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 10000.0f);
  EXPECT_EQ(c.n_ctx_train, 2048u);
}

TEST(ModelConfig, VocabSizeComesFromTokensThenVocabSizeThenEmbedding) {
  GgufWriter w = synth::make_writer(tiny("tiny"));
  w.set_u32("llama.vocab_size", 999);  // tokens win over it
  EXPECT_EQ(ModelConfig::from_gguf(open_written(w)).n_vocab, 320u);
  ASSERT_TRUE(w.erase("tokenizer.ggml.tokens"));
  EXPECT_EQ(ModelConfig::from_gguf(open_written(w)).n_vocab, 999u);
  ASSERT_TRUE(w.erase("llama.vocab_size"));
  EXPECT_EQ(ModelConfig::from_gguf(open_written(w)).n_vocab, 320u);  // token_embd's row count
}

TEST(ModelConfig, InconsistentHyperParametersAreRefused) {
  auto message = [](GgufWriter w) {
    try {
      const GgufFile f = open_written(w);
      ModelWeights::from_gguf(f, ModelConfig::from_gguf(f));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  GgufWriter w = synth::make_writer(tiny("tiny"));
  w.set_u32("llama.rope.dimension_count", 15);
  EXPECT_NE(message(w).find("rope.dimension_count 15"), std::string::npos) << message(w);
  w = synth::make_writer(tiny("tiny"));
  w.set_i32_array("llama.attention.head_count", {4, 4});
  EXPECT_NE(message(w).find("per-layer"), std::string::npos) << message(w);
  w = synth::make_writer(tiny("tiny"));
  w.set_u32("llama.attention.head_count", 3);
  w.set_u32("llama.attention.head_count_kv", 3);
  ASSERT_TRUE(w.erase("llama.attention.key_length"));
  EXPECT_NE(message(w).find("embedding_length 64 is not a multiple of head_count 3"), std::string::npos)
      << message(w);
  w = synth::make_writer(tiny("tiny"));
  w.set_u32("llama.block_count", 0);
  EXPECT_NE(message(w).find("llama.block_count = 0 is out of range"), std::string::npos) << message(w);
  w = synth::make_writer(tiny("tiny"));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", -1.0f);
  EXPECT_NE(message(w).find("layer_norm_rms_epsilon must be a positive"), std::string::npos) << message(w);
  w = synth::make_writer(tiny("tiny"));
  w.set_u32("llama.block_count", 3);  // the file has 2 layers
  EXPECT_NE(message(w).find("missing tensor blk.2.attn_norm.weight"), std::string::npos) << message(w);
  synth::SynthOptions q = tiny("tiny");
  q.type = TensorType::F16;
  w = synth::make_writer(q);
  w.set_u32("llama.vocab_size", 321);
  ASSERT_TRUE(w.erase("tokenizer.ggml.tokens"));
  EXPECT_NE(message(w).find("token_embd.weight has the wrong shape [64, 320] (expected [64, 321])"),
            std::string::npos)
      << message(w);
}

}  // namespace
}  // namespace kvtrie
