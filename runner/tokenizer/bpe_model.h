// Contract: the byte-level BPE model (tokenizer.ggml.model = gpt2): text bytes are mapped to the GPT-2 byte
// alphabet, cut into words by a PreTokenizer, and each word's adjacent pairs are merged by rank
// (tokenizer.ggml.merges, "left right" strings, best first). Lossless on any byte string. Built once by
// BpeModel::build; immutable afterwards, so encode and piece may run concurrently from any thread. The Vocab
// passed to every call must be the one it was built from (the Tokenizer owns both).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runner/tokenizer/pretokenizer.h"
#include "runner/tokenizer/vocab.h"

namespace kvtrie {

class GgufFile;

class BpeModel {
 public:
  // Reads the merges; throws InputError on a malformed merge or one naming an unknown token.
  static BpeModel build(const Vocab& vocab, const GgufFile& file, PreTokenizer pre);

  // Appends the tokens of a span of plain text (no special tokens in it) to out.
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;
  // The bytes a token stands for: normal tokens through the inverse byte alphabet, user-defined ones
  // verbatim, control/unknown/unused ones nothing.
  std::string piece(const Vocab& vocab, int32_t id) const;

  PreTokenizer pre_tokenizer() const { return pre_; }

 private:
  // Merges by (left id, right id), open addressing with linear probing: the table is probed for every
  // adjacent pair of every word, so it is flat and keyed by one integer.
  struct Merge {
    uint64_t key;  // pair_key(left, right); kNoMerge when the slot is empty
    int32_t rank;
    int32_t result;
  };
  static constexpr uint64_t kNoMerge = UINT64_MAX;
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  uint64_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  const Merge* find_merge(int32_t left, int32_t right) const;
  void encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) const;

  PreTokenizer pre_ = PreTokenizer::gpt2;
  // Llama 3 emits a word that is itself a token whole, without merging (its reference tokenizer does).
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_token_{};  // token of each byte's alphabet character, -1 when absent
  std::vector<Merge> merges_;              // power-of-two size
  int shift_ = 64;                         // 64 - log2(merges_.size())
};

// The GPT-2 byte alphabet: printable Latin-1 bytes stand for themselves, the others for U+0100 onwards.
char32_t byte_to_alphabet(uint8_t byte);
// The byte an alphabet character stands for, or -1 when the code point is not in the alphabet.
int alphabet_to_byte(char32_t code_point);

}  // namespace kvtrie
