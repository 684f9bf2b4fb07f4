// Golden test of the CPU reference forward pass on a real trained model: stories260K (a tiny llama2.c
// Llama) must reproduce its published greedy continuation exactly, and the Sequence API (batching, forking,
// truncating) must not change any logit.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "runner/model/gguf_file.h"
#include "runner/reference/reference_model.h"
#include "runner/reference/reference_ops.h"
#include "runner/tokenizer/tokenizer.h"
#include "tests/support/paths.h"

namespace kvtrie::reference {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";
constexpr const char* kGolden = "models/stories260K.greedy.txt";
constexpr const char* kPrompt = "Once upon a time";

class ReferenceStories : public testing::Test {
 protected:
  void SetUp() override {
    KVTRIE_REQUIRE_SHARED(kModel);
    file_ = std::make_unique<GgufFile>(GgufFile::open(test::shared_dir() / kModel));
    model_ = std::make_unique<ReferenceModel>(*file_);
    tokenizer_ = Tokenizer::from_gguf(*file_);
    bos_ = tokenizer_->bos();
    eos_ = tokenizer_->eos();
  }

  std::vector<int32_t> prompt_tokens() const {
    return tokenizer_->encode(kPrompt, EncodeOptions{.add_bos = true});
  }

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<ReferenceModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int32_t bos_ = -1;
  int32_t eos_ = -1;
};

TEST_F(ReferenceStories, ConfigIsTheTinyLlama) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, Architecture::Llama);
  EXPECT_EQ(c.n_embd, 64u);
  EXPECT_EQ(c.n_layers, 5u);
  EXPECT_EQ(c.n_heads, 8u);
  EXPECT_EQ(c.n_kv_heads, 4u);  // GQA is exercised by the golden run
  EXPECT_EQ(c.n_vocab, 512u);
  EXPECT_EQ(static_cast<uint32_t>(tokenizer_->n_vocab()), c.n_vocab);
}

TEST_F(ReferenceStories, GreedyContinuationMatchesGoldenText) {
  KVTRIE_REQUIRE_SHARED(kGolden);
  std::ifstream in(test::shared_dir() / kGolden, std::ios::binary);
  std::stringstream golden;
  golden << in.rdbuf();

  ReferenceModel::Sequence seq = model_->new_sequence();
  const std::vector<int32_t> stop{bos_, eos_};
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> prompt = prompt_tokens();
  ASSERT_EQ(prompt.front(), bos_);
  const std::vector<int32_t> generated = model_->generate_greedy(seq, prompt, 256, stop);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("generate_ms", std::to_string(ms));

  EXPECT_EQ(generated.size(), 256u);
  // The golden file is the prompt text followed by the generated text, decoded as a continuation.
  std::string text = kPrompt;
  StreamingDecoder decoder(*tokenizer_);
  for (int32_t id : generated) text += decoder.push(id);
  text += decoder.flush();
  EXPECT_EQ(text, golden.str());
}

TEST_F(ReferenceStories, ForwardBatchEqualsTokenByToken) {
  const std::vector<int32_t> tokens = prompt_tokens();
  ReferenceModel::Sequence one = model_->new_sequence();
  std::vector<float> last;
  for (int32_t t : tokens) last = model_->forward(one, t);
  ReferenceModel::Sequence batch = model_->new_sequence();
  EXPECT_EQ(model_->forward_batch(batch, tokens), last);
  ASSERT_EQ(batch.length(), one.length());
  for (uint32_t l = 0; l < model_->config().n_layers; ++l) {
    EXPECT_TRUE(std::ranges::equal(batch.keys(l), one.keys(l))) << "layer " << l;
    EXPECT_TRUE(std::ranges::equal(batch.values(l), one.values(l))) << "layer " << l;
  }
}

TEST_F(ReferenceStories, ForwardAllReturnsEveryTokensLogits) {
  const std::vector<int32_t> tokens = prompt_tokens();
  ReferenceModel::Sequence all_seq = model_->new_sequence();
  const std::vector<float> all = model_->forward_all(all_seq, tokens);
  const size_t n_vocab = model_->config().n_vocab;
  ASSERT_EQ(all.size(), tokens.size() * n_vocab);
  ReferenceModel::Sequence seq = model_->new_sequence();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> row = model_->forward(seq, tokens[i]);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), all.begin() + static_cast<ptrdiff_t>(i * n_vocab)))
        << "token " << i;
  }
}

TEST_F(ReferenceStories, ForkedSequenceContinuesIdentically) {
  ReferenceModel::Sequence a = model_->new_sequence();
  model_->forward_batch(a, prompt_tokens());
  ReferenceModel::Sequence b = a;  // fork
  const std::vector<int32_t> more{261, 378, 403};
  for (int32_t t : more) EXPECT_EQ(model_->forward(a, t), model_->forward(b, t));

  // Diverging after the fork does not disturb the other branch.
  ReferenceModel::Sequence c = a;
  model_->forward(c, 300);
  EXPECT_EQ(model_->forward(a, 301), model_->forward(b, 301));
}

TEST_F(ReferenceStories, TruncatedSequenceEqualsAFreshPrefix) {
  const std::vector<int32_t> tokens = prompt_tokens();
  ReferenceModel::Sequence long_seq = model_->new_sequence();
  model_->forward_batch(long_seq, tokens);
  model_->forward(long_seq, 300);
  model_->forward(long_seq, 301);
  long_seq.truncate(static_cast<uint32_t>(tokens.size()));
  EXPECT_EQ(long_seq.length(), tokens.size());

  ReferenceModel::Sequence fresh = model_->new_sequence();
  model_->forward_batch(fresh, tokens);
  EXPECT_EQ(model_->forward(long_seq, 302), model_->forward(fresh, 302));
}

TEST_F(ReferenceStories, PositionChangesTheLogits) {
  // The same token after different prefixes must give different logits (attention and rope are live).
  ReferenceModel::Sequence a = model_->new_sequence();
  ReferenceModel::Sequence b = model_->new_sequence();
  model_->forward(b, bos_);
  EXPECT_NE(model_->forward(a, 403), model_->forward(b, 403));
}

TEST_F(ReferenceStories, TokenOutsideTheVocabularyThrows) {
  ReferenceModel::Sequence seq = model_->new_sequence();
  EXPECT_THROW(model_->forward(seq, 512), Error);
  EXPECT_THROW(model_->forward(seq, -1), Error);
  EXPECT_EQ(seq.length(), 0u);
}

}  // namespace
}  // namespace kvtrie::reference
