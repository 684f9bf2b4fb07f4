// The hand-written pre-tokenizers against their reference regular expressions, on cases worked out by hand
// from the patterns (leftmost alternative wins, greedy with backtracking, the (?!\S) lookahead), plus the
// property that words always cover the input byte for byte. Needs no ../shared data.
#include <gtest/gtest.h>

#include <random>

#include "runner/tokenizer/pretokenizer.h"

namespace kvtrie {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view text, PreTokenizer kind) {
  Words words;
  for (std::string_view word : pretokenize(text, kind)) words.emplace_back(word);
  return words;
}

TEST(PreTokenizer, Gpt2) {
  const auto k = PreTokenizer::gpt2;
  EXPECT_EQ(split("Hello world  123 !!", k), (Words{"Hello", " world", " ", " 123", " !!"}));
  // Contractions are case-sensitive; "'VE" falls apart into punctuation and letters.
  EXPECT_EQ(split("I've I'VE", k), (Words{"I", "'ve", " I", "'", "VE"}));
  EXPECT_EQ(split("a  \n b", k), (Words{"a", "  \n", " b"}));
  EXPECT_EQ(split("x   ", k), (Words{"x", "   "}));  // trailing spaces stay together at the end
  EXPECT_EQ(split("12345abc", k), (Words{"12345", "abc"}));
  EXPECT_EQ(split("\xC3\x9Cn\xC3\xAF \xE6\x97\xA5\xE6\x9C\xAC", k),
            (Words{"\xC3\x9Cn\xC3\xAF", " \xE6\x97\xA5\xE6\x9C\xAC"}));
}

TEST(PreTokenizer, Llama3) {
  const auto k = PreTokenizer::llama3;
  EXPECT_EQ(split("I'VE 12345 abc\n\n  x", k),
            (Words{"I", "'VE", " ", "123", "45", " abc", "\n\n", " ", " x"}));
  // One non-letter, non-newline character may lead a letter run; a space may lead punctuation.
  EXPECT_EQ(split(" (normal) x.y", k), (Words{" (", "normal", ")", " x", ".y"}));
  // Punctuation swallows the newlines after it; whitespace ends after its last newline.
  EXPECT_EQ(split("ok!\n\nthen \t\n  next", k), (Words{"ok", "!\n\n", "then", " \t\n", " ", " next"}));
  EXPECT_EQ(split("\nword", k), (Words{"\n", "word"}));  // a newline never leads a letter run
}

TEST(PreTokenizer, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(split("x 12345", PreTokenizer::qwen2), (Words{"x", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("x 12345", PreTokenizer::llama3), (Words{"x", " ", "123", "45"}));
}

TEST(PreTokenizer, UnicodeCategoriesComeFromIcu) {
  // U+3000 IDEOGRAPHIC SPACE is whitespace; U+0661 ARABIC-INDIC DIGIT ONE is a number; U+0301 COMBINING
  // ACUTE is a mark (neither letter nor number), so it ends a letter run.
  EXPECT_EQ(split("a\xE3\x80\x80\xD9\xA1\xD9\xA2", PreTokenizer::gpt2),
            (Words{"a", "\xE3\x80\x80", "\xD9\xA1\xD9\xA2"}));
  EXPECT_EQ(split("e\xCC\x81x", PreTokenizer::gpt2), (Words{"e", "\xCC\x81", "x"}));
}

TEST(PreTokenizer, InvalidBytesAreSeparateOtherCharacters) {
  EXPECT_EQ(split("a\xFF\xFE"
                  "b",
                  PreTokenizer::gpt2),
            (Words{"a", "\xFF\xFE", "b"}));
  EXPECT_EQ(split("a\xFF\xFE"
                  "b",
                  PreTokenizer::llama3),
            (Words{"a", "\xFF\xFE", "b"}));
  EXPECT_EQ(split("a \xFF"
                  "b",
                  PreTokenizer::llama3),
            (Words{"a", " \xFF", "b"}));
  EXPECT_EQ(split("\xE6\x97", PreTokenizer::qwen2), (Words{"\xE6\x97"}));  // a truncated character
}

TEST(PreTokenizer, WordsCoverRandomBytesExactly) {
  std::mt19937 rng(99);
  const std::string pieces[] = {" ",
                                "\n",
                                "\r",
                                "\t",
                                "a",
                                "B",
                                "1",
                                "'",
                                "'s",
                                "'LL",
                                "!",
                                "\xC3\xA9",
                                "\xE3\x80\x80",
                                "\xF0\x9F\x98\x80",
                                "\xFF",
                                "\xC3"};
  for (const PreTokenizer kind : {PreTokenizer::gpt2, PreTokenizer::llama3, PreTokenizer::qwen2}) {
    for (int round = 0; round < 500; ++round) {
      std::string text;
      for (int i = static_cast<int>(rng() % 30); i > 0; --i) text += pieces[rng() % std::size(pieces)];
      std::string joined;
      for (std::string_view word : pretokenize(text, kind)) {
        ASSERT_FALSE(word.empty());
        joined += word;
      }
      ASSERT_EQ(joined, text);
    }
  }
}

TEST(PreTokenizer, NamesFromGguf) {
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizer::qwen2);
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2"), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("no-such-rule"), std::nullopt);
}

}  // namespace
}  // namespace kvtrie
