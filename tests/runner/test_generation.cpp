// The engine-independent generation piece: stop-string matching and hold-back, UTF-8-safe streaming text,
// end-of-generation and length limits, and the stream channel's cancel-on-destroy contract.
#include <gtest/gtest.h>

#include "bench/synthetic/synthetic_model.h"
#include "runner/engine/engine.h"
#include "runner/engine/generation.h"
#include "runner/model/gguf_file.h"
#include "runner/tokenizer/tokenizer.h"
#include "tests/support/paths.h"

namespace kvtrie::engine {
namespace {

class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = synth::write_preset(test::scratch_dir() / "tiny.gguf", "tiny");
    tokenizer_ = Tokenizer::from_gguf(GgufFile::open(path));
  }
  int32_t byte_token(unsigned char b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    int32_t id = tokenizer_->find_token(name);
    EXPECT_GE(id, 0) << name;
    return id;
  }
  // Feeds the bytes of `text` as byte tokens; returns the concatenated emitted text.
  std::string feed(Generation& g, const std::string& text) {
    std::string out;
    for (unsigned char c : text) {
      if (g.done()) break;
      out += g.accept(byte_token(c), std::nullopt).text;
    }
    return out;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST(StopStrings, FindsTheEarliestMatchAndTheLongestPartialSuffix) {
  std::vector<std::string> stops = {"world", "lo"};
  auto m = find_stop("hello world", stops);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->position, 3u);
  EXPECT_EQ(m->stop_index, 1u);
  EXPECT_FALSE(find_stop("abc", stops));
  EXPECT_EQ(stop_prefix_overlap("hello wor", {"world"}), 3u);
  EXPECT_EQ(stop_prefix_overlap("hello w", {"world", " wx"}), 2u);
  EXPECT_EQ(stop_prefix_overlap("abc", {"world"}), 0u);
}

TEST_F(GenerationTest, StopStringSpanningTokensIsNeverEmitted) {
  GenerateRequest req;
  req.prompt = {1};
  req.max_tokens = 100;
  req.stop = {"lo w"};
  Generation g(*tokenizer_, req, 256);
  std::string emitted = feed(g, "hello world");
  ASSERT_TRUE(g.done());
  EXPECT_EQ(*g.stop_kind(), StopKind::StopString);
  Chunk last = g.finish({});
  EXPECT_EQ(emitted + last.text, "hel");
  EXPECT_EQ(last.final->stop_string, "lo w");
  EXPECT_EQ(last.final->completion_tokens, 7u);  // "hello w": the token completing the match counts
}

TEST_F(GenerationTest, HeldBackTextIsReleasedWhenItCannotBecomeAStop) {
  GenerateRequest req;
  req.prompt = {1};
  req.max_tokens = 100;
  req.stop = {"xyz"};
  Generation g(*tokenizer_, req, 256);
  EXPECT_EQ(g.accept(byte_token('a'), std::nullopt).text, "a");
  EXPECT_EQ(g.accept(byte_token('x'), std::nullopt).text, "");  // might start "xyz"
  EXPECT_EQ(g.accept(byte_token('b'), std::nullopt).text, "xb");
  EXPECT_EQ(g.accept(byte_token('x'), std::nullopt).text, "");
  Chunk last = g.finish({}, StopKind::Length);  // the run ends: held text becomes final
  EXPECT_EQ(last.text, "x");
}

TEST_F(GenerationTest, MultiByteCharacterArrivesWithItsLastByte) {
  GenerateRequest req;
  req.prompt = {1};
  req.max_tokens = 10;
  Generation g(*tokenizer_, req, 256);
  EXPECT_EQ(g.accept(byte_token(0xC3), std::nullopt).text, "");
  EXPECT_EQ(g.accept(byte_token(0xA9), std::nullopt).text, "\xC3\xA9");
}

TEST_F(GenerationTest, EndOfGenerationTokenStopsAndIsNotEmitted) {
  GenerateRequest req;
  req.prompt = {1};
  req.max_tokens = 10;
  Generation g(*tokenizer_, req, 256);
  g.accept(byte_token('a'), std::nullopt);
  Chunk c = g.accept(tokenizer_->eos(), std::nullopt);
  EXPECT_TRUE(c.tokens.empty());
  ASSERT_TRUE(g.done());
  EXPECT_EQ(*g.stop_kind(), StopKind::Eos);
  EXPECT_EQ(g.finish({}).final->completion_tokens, 1u);
}

TEST_F(GenerationTest, MaxTokensAndContextBoundTheRun) {
  GenerateRequest req;
  req.prompt = {1, 2, 3};
  req.max_tokens = 3;
  Generation g(*tokenizer_, req, 256);
  feed(g, "abcdef");
  EXPECT_EQ(*g.stop_kind(), StopKind::Length);
  EXPECT_EQ(g.completion_tokens(), 3u);

  req.max_tokens = -1;  // until the context (5 tokens) is full: 3 prompt + 2 generated
  Generation h(*tokenizer_, req, 5);
  feed(h, "abcdef");
  EXPECT_EQ(h.completion_tokens(), 2u);
}

TEST_F(GenerationTest, LogprobsAreLogSoftmaxOfTheRawLogits) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  TokenLogprob lp = make_token_logprob(logits, 2, 2);
  const double z = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(lp.logprob, 2.0 - z, 1e-5);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 2);
}

TEST(StreamChannelTest, DestroyingTheReaderCancelsAndTheFinalChunkEndsTheStream) {
  auto channel = std::make_shared<StreamChannel>();
  {
    GenerationStream reader(channel);
    channel->push(Chunk{"a", {1}, {}, std::nullopt});
    Chunk last;
    last.final = GenerationStats{};
    channel->finish(last);
    Chunk out;
    EXPECT_EQ(reader.next(out, std::chrono::milliseconds(10)), StreamChannel::Poll::Chunk);
    EXPECT_EQ(out.text, "a");
    EXPECT_EQ(reader.next(out, std::chrono::milliseconds(10)), StreamChannel::Poll::Chunk);
    EXPECT_TRUE(out.final.has_value());
    EXPECT_EQ(reader.next(out, std::chrono::milliseconds(10)), StreamChannel::Poll::End);
    EXPECT_FALSE(channel->cancelled());
  }
  EXPECT_TRUE(channel->cancelled());

  auto idle = std::make_shared<StreamChannel>();
  GenerationStream r2(idle);
  Chunk out;
  EXPECT_EQ(r2.next(out, std::chrono::milliseconds(5)), StreamChannel::Poll::Timeout);
}

}  // namespace
}  // namespace kvtrie::engine
