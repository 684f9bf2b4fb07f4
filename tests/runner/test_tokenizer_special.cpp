// Special tokens and flags: parse_special on/off (reference vocabs and a synthetic one), longest match,
// add_bos/add_eos defaults and per-call overrides, end-of-generation ids, render_special, and refusal of
// broken vocab metadata with InputError.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "base/error.h"
#include "tests/runner/test_tokenizer_support.h"

namespace kvtrie {
namespace {

using test::load_tokenizer;
using test::shared_dir;
using test::vocab_path;

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST(TokenizerSpecial, Llama3ChatMarkersAreParsedOnlyWhenAsked) {
  KVTRIE_REQUIRE_SHARED(vocab_path("llama-bpe"));
  const auto loaded = load_tokenizer(shared_dir() / vocab_path("llama-bpe"));
  const Tokenizer& tok = *loaded.tokenizer;
  const int32_t start = tok.find_token("<|start_header_id|>");
  const int32_t end = tok.find_token("<|end_header_id|>");
  const int32_t eot = tok.find_token("<|eot_id|>");
  ASSERT_GE(start, 0);
  ASSERT_GE(end, 0);
  ASSERT_GE(eot, 0);
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>";

  const auto parsed = tok.encode(text, false, /*parse_special=*/true);
  EXPECT_EQ(parsed, concat({{start},
                            tok.encode("user", false, false),
                            {end},
                            tok.encode("\n\nHi there", false, false),
                            {eot}}));
  EXPECT_EQ(tok.decode(parsed), "user\n\nHi there");  // control tokens decode to nothing by default
  EXPECT_EQ(tok.decode(parsed, /*render_special=*/true), text);

  const auto plain = tok.encode(text, false, /*parse_special=*/false);
  EXPECT_FALSE(contains(plain, start));
  EXPECT_FALSE(contains(plain, end));
  EXPECT_FALSE(contains(plain, eot));
  EXPECT_EQ(tok.decode(plain), text);  // the markers were ordinary text
}

TEST(TokenizerSpecial, QwenChatMarkersAndEndOfGeneration) {
  KVTRIE_REQUIRE_SHARED(vocab_path("qwen2"));
  const auto loaded = load_tokenizer(shared_dir() / vocab_path("qwen2"));
  const Tokenizer& tok = *loaded.tokenizer;
  const int32_t im_start = tok.find_token("<|im_start|>");
  const int32_t im_end = tok.find_token("<|im_end|>");
  const auto parsed = tok.encode("<|im_start|>user\nhello<|im_end|>", false, true);
  EXPECT_EQ(parsed, concat({{im_start}, tok.encode("user\nhello", false, false), {im_end}}));
  EXPECT_FALSE(contains(tok.encode("<|im_start|>user\nhello<|im_end|>", false, false), im_start));
  // The file names <|endoftext|> as eos; a chat model ends its turn with <|im_end|>.
  EXPECT_TRUE(tok.is_end_of_generation(tok.eos()));
  EXPECT_TRUE(tok.is_end_of_generation(im_end));
  EXPECT_FALSE(tok.is_end_of_generation(im_start));
  EXPECT_FALSE(tok.is_end_of_generation(tok.encode("hello", false, false)[0]));
  EXPECT_FALSE(tok.add_bos_default());
}

TEST(TokenizerSpecial, SentencePieceBosEosParsingAndFlags) {
  KVTRIE_REQUIRE_SHARED(vocab_path("llama-spm"));
  const auto loaded = load_tokenizer(shared_dir() / vocab_path("llama-spm"));
  const Tokenizer& tok = *loaded.tokenizer;
  ASSERT_GE(tok.bos(), 0);
  ASSERT_GE(tok.eos(), 0);
  EXPECT_TRUE(tok.add_bos_default());  // tokenizer.ggml.add_bos_token = true
  const auto hello = tok.encode("Hello", false, false);

  EXPECT_EQ(tok.encode("Hello", /*add_special=*/true, false), concat({{tok.bos()}, hello}));
  EXPECT_EQ(tok.encode("", true, false), std::vector<int32_t>{tok.bos()});
  EXPECT_TRUE(tok.encode("", false, false).empty());
  EXPECT_EQ(tok.encode("Hello", EncodeOptions{.add_bos = false, .add_eos = true}),
            concat({hello, {tok.eos()}}));
  EXPECT_EQ(tok.encode("Hello", EncodeOptions{.add_bos = true, .add_eos = true}),
            concat({{tok.bos()}, hello, {tok.eos()}}));

  // A plain span after a special token gets the dummy space prefix again, like the start of the text.
  EXPECT_EQ(tok.encode("<s>Hello</s>", false, true), concat({{tok.bos()}, hello, {tok.eos()}}));
  const auto plain = tok.encode("<s>Hello</s>", false, false);
  EXPECT_FALSE(contains(plain, tok.bos()));
  EXPECT_FALSE(contains(plain, tok.eos()));
  EXPECT_EQ(tok.decode(plain), "<s>Hello</s>");
  EXPECT_TRUE(tok.is_end_of_generation(tok.eos()));
  EXPECT_FALSE(tok.is_end_of_generation(tok.bos()));
}

TEST(TokenizerSpecial, ByteLevelDefaultsForBos) {
  KVTRIE_REQUIRE_SHARED(vocab_path("gpt-2"));
  KVTRIE_REQUIRE_SHARED(vocab_path("llama-bpe"));
  const auto gpt2 = load_tokenizer(shared_dir() / vocab_path("gpt-2"));
  EXPECT_FALSE(gpt2.tokenizer->add_bos_default());
  EXPECT_EQ(gpt2.tokenizer->encode("Hi", true, false), gpt2.tokenizer->encode("Hi", false, false));
  // Llama 3 files carry no add_bos_token key, yet the model expects <|begin_of_text|>.
  const auto llama3 = load_tokenizer(shared_dir() / vocab_path("llama-bpe"));
  EXPECT_TRUE(llama3.tokenizer->add_bos_default());
  EXPECT_EQ(llama3.tokenizer->encode("Hi", true, false).front(),
            llama3.tokenizer->find_token("<|begin_of_text|>"));
}

// Synthetic vocab: where two special tokens start at the same byte the longer one wins, and plain text
// between them is encoded normally.
TEST(TokenizerSpecial, LongestSpecialTokenWins) {
  const auto loaded = test::write_and_load(test::byte_bpe_writer({"ab"}, {"<x>", "<x><y>", "<y>"}), "v.gguf");
  const Tokenizer& tok = *loaded.tokenizer;
  const int32_t x = tok.find_token("<x>"), xy = tok.find_token("<x><y>"), y = tok.find_token("<y>");
  const int32_t ab = tok.find_token("ab");
  ASSERT_GE(ab, 256);
  EXPECT_EQ(tok.encode("ab<x><y>ab<x>b<y>", false, true), (std::vector<int32_t>{ab, xy, ab, x, 'b', y}));
  EXPECT_EQ(tok.encode("<x><y>", false, false).size(), 6u);  // six single-byte tokens
}

TEST(TokenizerSpecial, AddEosFromMetadata) {
  GgufWriter writer = test::byte_bpe_writer({}, {"<bos>", "<eos>"});
  writer.set_u32("tokenizer.ggml.bos_token_id", 256);
  writer.set_u32("tokenizer.ggml.eos_token_id", 257);
  writer.set_bool("tokenizer.ggml.add_bos_token", false);
  writer.set_bool("tokenizer.ggml.add_eos_token", true);
  const auto loaded = test::write_and_load(writer, "v.gguf");
  EXPECT_EQ(loaded.tokenizer->encode("a", true, false), (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ(loaded.tokenizer->encode("a", false, false), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(loaded.tokenizer->encode("a", EncodeOptions{.add_bos = true}), (std::vector<int32_t>{256, 'a'}));
}

// Synthetic SentencePiece vocab with a piece that spans a word start ("x▁y"): merging must not be cut at
// word starts then (the fast word-by-word path is only for vocabs without such pieces).
TEST(TokenizerSentencePiece, PieceAcrossAWordStartIsFound) {
  const auto loaded = test::write_and_load(
      test::spm_writer(
          {{"\xE2\x96\x81", 0}, {"\xE2\x96\x81x", 1}, {"x\xE2\x96\x81", 3}, {"x\xE2\x96\x81y", 5}}),
      "spm.gguf");
  const Tokenizer& tok = *loaded.tokenizer;
  const int32_t space = tok.find_token("\xE2\x96\x81"), xy = tok.find_token("x\xE2\x96\x81y");
  EXPECT_EQ(tok.encode("x y", false, false), (std::vector<int32_t>{space, xy}));
  EXPECT_EQ(tok.decode(tok.encode("x y", true, false)), "x y");
}

// Byte fallback and the dummy prefix on a vocab with only a few pieces; add_space_prefix = false (as Gemma
// files say) turns the prefix and its removal off.
TEST(TokenizerSentencePiece, ByteFallbackAndSpacePrefixFlag) {
  GgufWriter writer = test::spm_writer({{"\xE2\x96\x81", 0}, {"\xE2\x96\x81H", 2}, {"\xE2\x96\x81Hi", 4}});
  const auto with_prefix = test::write_and_load(writer, "prefix.gguf");
  const Tokenizer& a = *with_prefix.tokenizer;
  const int32_t hi = a.find_token("\xE2\x96\x81Hi");
  // "!" is no piece: it falls back to its byte token <0x21>, id 3 + 0x21.
  EXPECT_EQ(a.encode("Hi!", true, false), (std::vector<int32_t>{1, hi, 3 + 0x21}));
  EXPECT_EQ(a.decode(a.encode("Hi!", true, false)), "Hi!");

  writer.set_bool("tokenizer.ggml.add_space_prefix", false);
  const auto without_prefix = test::write_and_load(writer, "noprefix.gguf");
  const Tokenizer& b = *without_prefix.tokenizer;
  EXPECT_EQ(b.encode("Hi", false, false), (std::vector<int32_t>{3 + 'H', 3 + 'i'}));
  EXPECT_EQ(b.encode(" Hi", false, false), (std::vector<int32_t>{hi}));
  EXPECT_EQ(b.decode(std::vector<int32_t>{hi}), " Hi");  // nothing to strip without the prefix
  EXPECT_FALSE(b.strips_leading_space());
}

// A pre-tokenizer this project does not implement falls back to the gpt-2 rules (with a warning) instead of
// refusing the model; ids outside the vocab decode to nothing.
TEST(TokenizerSpecial, UnknownPreTokenizerAndOutOfRangeIds) {
  const auto fallback =
      test::write_and_load(test::byte_bpe_writer({"ab", "1234"}, {}, "no-such-rule"), "a.gguf");
  const auto gpt2 = test::write_and_load(test::byte_bpe_writer({"ab", "1234"}, {}, "gpt-2"), "b.gguf");
  const auto llama3 = test::write_and_load(test::byte_bpe_writer({"ab", "1234"}, {}, "llama-bpe"), "c.gguf");
  const std::string text = "ab 12345 y'all  \n!";
  EXPECT_EQ(fallback.tokenizer->encode(text, false, false), gpt2.tokenizer->encode(text, false, false));
  // The rule matters here: llama3 cuts digits in threes, so "1234" cannot merge.
  EXPECT_NE(llama3.tokenizer->encode(text, false, false), gpt2.tokenizer->encode(text, false, false));
  const Tokenizer& tok = *gpt2.tokenizer;
  EXPECT_EQ(tok.token_piece(-1), "");
  EXPECT_EQ(tok.token_piece(tok.n_vocab()), "");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{'a', -5, tok.n_vocab(), 'b'}), "ab");
}

// Each broken vocab is refused with InputError, never a crash or a silently wrong tokenizer.
TEST(TokenizerSpecial, BrokenVocabIsRefused) {
  const std::vector<std::pair<std::string, std::function<void(GgufWriter&)>>> breakages = {
      {"no tokens", [](GgufWriter& w) { w.erase("tokenizer.ggml.tokens"); }},
      {"no model", [](GgufWriter& w) { w.erase("tokenizer.ggml.model"); }},
      {"unknown model", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "bert"); }},
      {"short scores",
       [](GgufWriter& w) {
         w.set_f32_array("tokenizer.ggml.scores", {0.0, 1.0});
       }},
      {"short types",
       [](GgufWriter& w) {
         w.set_i32_array("tokenizer.ggml.token_type", {1, 1});
       }},
      {"bad type",
       [](GgufWriter& w) { w.set_i32_array("tokenizer.ggml.token_type", std::vector<int64_t>(257, 9)); }},
      {"bos out of range", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 5000); }},
      {"merge of unknown token",
       [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"zz qq"}); }},
      {"merge without space", [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"ab"}); }},
      {"add_bos without bos", [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_bos_token", true); }},
  };
  int index = 0;
  for (const auto& [what, breakage] : breakages) {
    GgufWriter writer = test::byte_bpe_writer({}, {"<s>"});
    breakage(writer);
    const auto path = test::scratch_dir() / ("broken" + std::to_string(index++) + ".gguf");
    writer.write(path);
    const GgufFile file = GgufFile::open(path);
    EXPECT_THROW(Tokenizer::from_gguf(file), InputError) << what;
  }
  // The all-ones "none" id some converters write is accepted as absent.
  GgufWriter writer = test::byte_bpe_writer({}, {});
  writer.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
  writer.set_u32("tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
  EXPECT_EQ(test::write_and_load(writer, "none.gguf").tokenizer->eos(), -1);
}

}  // namespace
}  // namespace kvtrie
