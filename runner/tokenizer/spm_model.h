// Contract: the SentencePiece BPE model (tokenizer.ggml.model = llama): spaces become U+2581, the text is cut
// into UTF-8 characters and the adjacent pair whose concatenation is the best-scoring token is merged until
// no pair is a token; characters no token covers fall back to <0xXX> byte tokens. Built once by
// SpmModel::build; immutable afterwards, so encode and piece may run concurrently from any thread. The Vocab
// passed to every call must be the one it was built from (the Tokenizer owns both).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runner/tokenizer/vocab.h"

namespace kvtrie {

class SpmModel {
 public:
  static SpmModel build(const Vocab& vocab);

  // Appends the tokens of a span of plain text (the caller has added any dummy space prefix) to out.
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;
  // The bytes a token stands for: U+2581 read as a space, byte tokens as their byte, control tokens nothing,
  // the unknown token " \u2047 " (as SentencePiece renders it).
  std::string piece(const Vocab& vocab, int32_t id) const;

 private:
  void encode_segment(const Vocab& vocab, std::string_view escaped, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_token_{};
  // No text token holds U+2581 after another character, so text can be merged word by word.
  bool words_are_independent_ = false;  // the <0xXX> token of each byte, -1 when absent
};

}  // namespace kvtrie
