// The five reference vocabularies of ../shared/vocab: every test vector encodes to its expected ids (no
// BOS/EOS, no special-token parsing), decoding restores the inputs and random bytes, streaming decode never
// splits a character, and construction and encoding stay fast on big vocabs and long texts.
#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <map>
#include <random>
#include <thread>

#include "tests/runner/test_tokenizer_support.h"

namespace kvtrie {
namespace {

using test::load_tokenizer;
using test::read_vectors;
using test::shared_dir;
using test::vocab_path;

class VocabTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    KVTRIE_REQUIRE_SHARED(vocab_path(GetParam()));
    // Loaded once per vocab for the whole executable: the tokenizer is immutable, and loading the big
    // vocabs for every test would dominate the run time.
    static std::map<std::string, test::LoadedTokenizer> cache;
    auto it = cache.find(GetParam());
    if (it == cache.end())
      it = cache.emplace(GetParam(), load_tokenizer(shared_dir() / vocab_path(GetParam()))).first;
    tokenizer_ = it->second.tokenizer.get();
    vectors_ = read_vectors(GetParam());
  }
  const Tokenizer& tok() const { return *tokenizer_; }

  const Tokenizer* tokenizer_ = nullptr;
  std::vector<test::TestVector> vectors_;
};

TEST_P(VocabTest, EncodesEveryReferenceVector) {
  ASSERT_EQ(vectors_.size(), 46u) << "the .inp file should hold 46 inputs";
  int passed = 0;
  for (const auto& vector : vectors_) {
    const std::vector<int32_t> ids =
        tok().encode(vector.input, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, vector.expected) << "input: \"" << vector.input << "\"";
    passed += ids == vector.expected;
  }
  EXPECT_EQ(passed, 46);
}

// Byte-level BPE is lossless; SentencePiece too for these inputs (none holds U+2581), because decode drops
// exactly the dummy space prefix that encode added.
TEST_P(VocabTest, DecodeRestoresEveryReferenceInput) {
  for (const auto& vector : vectors_) {
    EXPECT_EQ(tok().decode(tok().encode(vector.input, false, false)), vector.input);
    // With BOS in front the leading-space rule still applies to the first text token.
    EXPECT_EQ(tok().decode(tok().encode(vector.input, EncodeOptions{.add_bos = true})), vector.input);
  }
}

// Arbitrary bytes, invalid UTF-8 included: byte-level BPE covers every byte; SentencePiece's byte fallback
// covers every character it has no piece for. Only U+2581 itself is excluded (SentencePiece reads it as a
// space by design).
TEST_P(VocabTest, RandomBytesRoundTrip) {
  std::mt19937 rng(1234);
  const std::string fragments[] = {" ",
                                   "  ",
                                   "\n",
                                   "\t",
                                   "a",
                                   "Z",
                                   "7",
                                   "'s",
                                   "\xC3\xA9",
                                   "\xE6\x97\xA5",
                                   "\xF0\x9F\x98\x80",
                                   "<s>",
                                   "<|endoftext|>",
                                   "\xFF",
                                   "\xC3",
                                   "\x80",
                                   "\r\n"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int length = static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) {
      if (rng() % 2 == 0) {
        text.push_back(static_cast<char>(rng() % 256));
      } else {
        text += fragments[rng() % std::size(fragments)];
      }
    }
    for (size_t pos; (pos = text.find("\xE2\x96\x81")) != std::string::npos;) text.erase(pos, 3);
    const std::vector<int32_t> ids = tok().encode(text, false, false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok().n_vocab());
    ASSERT_EQ(tok().decode(ids), text) << "round " << round;
  }
}

// Every chunk a StreamingDecoder returns is valid UTF-8 and together they are the whole decode, even where
// tokens split characters (the emoji and CJK inputs do for all five vocabs).
TEST_P(VocabTest, StreamingDecoderNeverSplitsACharacter) {
  std::string text;
  for (const auto& vector : vectors_) text += vector.input;
  const std::vector<int32_t> ids = tok().encode(text, true, false);
  StreamingDecoder decoder(tok(), /*at_text_start=*/true);
  std::string streamed;
  int split_tokens = 0;
  for (int32_t id : ids) {
    const std::string chunk = decoder.push(id);
    ASSERT_TRUE(test::icu_valid_utf8(chunk)) << "token " << id;
    split_tokens += !test::icu_valid_utf8(tok().token_piece(id));
    streamed += chunk;
  }
  streamed += decoder.flush();
  EXPECT_GT(split_tokens, 0) << "the text should contain tokens that carry part of a character";
  EXPECT_EQ(streamed, tok().decode(ids));
  EXPECT_EQ(streamed, text);
}

// The tokenizer is shared by all request threads: concurrent encodes and decodes give the single-thread
// results.
TEST_P(VocabTest, ConcurrentUseGivesTheSameResults) {
  std::vector<std::vector<int32_t>> expected;
  for (const auto& vector : vectors_) expected.push_back(tok().encode(vector.input, true, false));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < vectors_.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t) * 11) % vectors_.size();  // threads start apart
          const auto ids = tok().encode(vectors_[k].input, true, false);
          if (ids != expected[k] || tok().decode(ids) != vectors_[k].input) ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Thread CPU time, so that other jobs on a busy CI machine do not count.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Guards against quadratic work: big vocabs build in well under a second, and one 100,000-byte word (a
// single pre-token for BPE, one symbol run for SentencePiece) encodes in a fraction of a second. The limits
// are generous for sanitizer builds; a quadratic regression takes minutes.
TEST_P(VocabTest, BuildAndLongTextAreFast) {
  const GgufFile file = GgufFile::open(shared_dir() / vocab_path(GetParam()));
  const double build_start = cpu_seconds();
  const auto tokenizer = Tokenizer::from_gguf(file);
  EXPECT_LT(cpu_seconds() - build_start, 3.0);

  const std::string long_word(100000, 'a');
  const std::string long_text = [] {
    std::string text;
    while (text.size() < 100000) text += "Hello, y'all! \xE6\x97\xA5\xE6\x9C\xAC 3333 \n\n  ";
    return text;
  }();
  const double encode_start = cpu_seconds();
  const auto word_ids = tokenizer->encode(long_word, false, false);
  const auto text_ids = tokenizer->encode(long_text, false, false);
  EXPECT_LT(cpu_seconds() - encode_start, 5.0);
  EXPECT_EQ(tokenizer->decode(word_ids), long_word);
  EXPECT_EQ(tokenizer->decode(text_ids), long_text);
}

INSTANTIATE_TEST_SUITE_P(Reference, VocabTest,
                         testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2"),
                         [](const testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace kvtrie
