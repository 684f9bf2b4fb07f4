// stories260K (a Llama SentencePiece vocab of 512 tokens): the prompt of the reference greedy run encodes
// with BOS first, decodes back, and is a token prefix of the whole reference text, which re-encodes to BOS +
// prompt + the 256 generated tokens the reference run produced.
#include <gtest/gtest.h>

#include "tests/runner/test_tokenizer_support.h"

namespace kvtrie {
namespace {

TEST(TokenizerStories, PromptEncodesWithBosAndMatchesTheReferenceText) {
  KVTRIE_REQUIRE_SHARED("models/stories260K.gguf");
  KVTRIE_REQUIRE_SHARED("models/stories260K.greedy.txt");
  const auto loaded = test::load_tokenizer(test::shared_dir() / "models/stories260K.gguf");
  const Tokenizer& tok = *loaded.tokenizer;
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.model(), VocabModel::spm);
  ASSERT_TRUE(tok.add_bos_default());

  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> ids = tok.encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), tok.bos());
  std::string pieces;
  for (size_t i = 1; i < ids.size(); ++i) pieces += tok.token_piece(ids[i]);
  EXPECT_EQ(pieces, " " + prompt);  // the dummy space prefix, one piece per word or less
  EXPECT_EQ(tok.decode(ids), prompt);

  const std::string reference = test::read_file(test::shared_dir() / "models/stories260K.greedy.txt");
  ASSERT_TRUE(reference.starts_with(prompt));
  const std::vector<int32_t> all = tok.encode(reference, true, false);
  ASSERT_GE(all.size(), ids.size());
  EXPECT_TRUE(std::equal(ids.begin(), ids.end(), all.begin()));
  EXPECT_EQ(all.size(), ids.size() + 256);  // README: exactly 256 generated tokens, no BOS/EOS among them
  EXPECT_EQ(tok.decode(all), reference);
  for (int32_t id : all) EXPECT_FALSE(tok.is_end_of_generation(id));
}

}  // namespace
}  // namespace kvtrie
