// UTF-8 helpers and StreamingDecoder on a synthetic byte-level vocab (every byte its own token, so every
// multi-byte character is split across tokens): chunks are complete characters, held-back bytes come out when
// the character completes, invalid bytes become U+FFFD at once, a truncated tail on flush. No ../shared data.
#include <gtest/gtest.h>

#include <random>

#include "tests/runner/test_tokenizer_support.h"

namespace kvtrie {
namespace {

TEST(Utf8, DecodeFollowsTheUnicodeWellFormednessTable) {
  using utf8::Status;
  auto status = [](std::string_view s) { return utf8::decode(s, 0).status; };
  EXPECT_EQ(status("a"), Status::ok);
  EXPECT_EQ(utf8::decode("\xE6\x97\xA5", 0).code_point, U'\u65E5');
  EXPECT_EQ(utf8::decode("\xF0\x9F\x98\x80", 0).code_point, U'\U0001F600');
  EXPECT_EQ(status("\xC0\x80"), Status::invalid);          // overlong NUL
  EXPECT_EQ(status("\xE0\x80\x80"), Status::invalid);      // overlong
  EXPECT_EQ(status("\xED\xA0\x80"), Status::invalid);      // surrogate U+D800
  EXPECT_EQ(status("\xF4\x90\x80\x80"), Status::invalid);  // above U+10FFFF
  EXPECT_EQ(status("\x80"), Status::invalid);              // stray continuation
  EXPECT_EQ(status("\xE6\x97"), Status::truncated);
  EXPECT_EQ(status("\xE6\x97"
                   "a"),
            Status::invalid);
  EXPECT_EQ(utf8::to_valid("a\xFF"
                           "b\xE6\x97"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(Utf8, AgreesWithIcuOnRandomBytes) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    for (int i = static_cast<int>(rng() % 8); i > 0; --i)
      text.push_back(static_cast<char>(0x7F + rng() % 0x78));
    ASSERT_EQ(utf8::is_valid(text), test::icu_valid_utf8(text)) << round;
    ASSERT_TRUE(test::icu_valid_utf8(utf8::to_valid(text)));
  }
}

class StreamingTest : public testing::Test {
 protected:
  void SetUp() override {
    loaded_ = std::make_unique<test::LoadedTokenizer>(
        test::write_and_load(test::byte_bpe_writer({}, {"<eos>"}), "bytes.gguf"));
  }
  const Tokenizer& tok() const { return *loaded_->tokenizer; }
  std::unique_ptr<test::LoadedTokenizer> loaded_;
};

TEST_F(StreamingTest, HoldsBackAPartialCharacterUntilItCompletes) {
  // "h" U+00E9 U+1F600 "!" as bytes: 68 | C3 A9 | F0 9F 98 80 | 21
  const std::string text = "h\xC3\xA9\xF0\x9F\x98\x80!";
  const std::vector<int32_t> ids = tok().encode(text, false, false);
  ASSERT_EQ(ids.size(), text.size());  // one token per byte in this vocab
  StreamingDecoder decoder(tok());
  const std::vector<std::string> expected = {"h", "", "\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80", "!"};
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(decoder.push(ids[i]), expected[i]) << "token " << i;
  EXPECT_EQ(decoder.flush(), "");
}

TEST_F(StreamingTest, InvalidBytesBecomeReplacementCharacters) {
  StreamingDecoder decoder(tok());
  EXPECT_EQ(decoder.push(0xFF), "\xEF\xBF\xBD");  // can never start a character: replaced at once
  EXPECT_EQ(decoder.push(0xE6), "");
  EXPECT_EQ(decoder.push('a'),
            "\xEF\xBF\xBD"
            "a");  // the held lead byte turned out to be invalid
  EXPECT_EQ(decoder.push(0xE6), "");
  EXPECT_EQ(decoder.push(0x97), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");  // the stream ended inside a character
  EXPECT_EQ(decoder.push('b'), "b");           // usable after flush
}

TEST_F(StreamingTest, ControlTokensAddNothing) {
  StreamingDecoder decoder(tok());
  EXPECT_EQ(decoder.push(0xC3), "");
  EXPECT_EQ(decoder.push(tok().find_token("<eos>")), "");
  EXPECT_EQ(decoder.push(0xA9), "\xC3\xA9");
}

TEST_F(StreamingTest, RandomTextChunksAreValidAndComplete) {
  std::mt19937 rng(3);
  const std::string pieces[] = {"a", " ", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80", "\n"};
  for (int round = 0; round < 100; ++round) {
    std::string text;
    for (int i = static_cast<int>(rng() % 20); i > 0; --i) text += pieces[rng() % std::size(pieces)];
    StreamingDecoder decoder(tok());
    std::string streamed;
    for (int32_t id : tok().encode(text, false, false)) {
      const std::string chunk = decoder.push(id);
      ASSERT_TRUE(test::icu_valid_utf8(chunk));
      streamed += chunk;
    }
    streamed += decoder.flush();
    ASSERT_EQ(streamed, text);
  }
}

}  // namespace
}  // namespace kvtrie
