// Contract: the token table of a tokenizer, read from GGUF metadata (tokenizer.ggml.*): token texts, scores,
// types, the text -> id index and the special token ids. Built once by Vocab::from_gguf, which refuses a
// broken table with InputError; immutable afterwards and safe to read from any thread. Does not keep the
// GgufFile.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtrie {

class GgufFile;

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

enum class VocabModel : uint8_t { spm, bpe };  // tokenizer.ggml.model "llama" / "gpt2"

class Vocab {
 public:
  static Vocab from_gguf(const GgufFile& file);  // throws InputError naming the file and the problem

  VocabModel model() const { return model_; }
  const std::string& pre() const { return pre_; }  // tokenizer.ggml.pre, "" when absent
  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }

  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }

  // Any token with exactly this text, or -1.
  int32_t find(std::string_view text) const;
  // A token that plain text may produce (normal or user-defined; never control, unknown, unused or byte), or
  // -1.
  int32_t find_text_token(std::string_view text) const;
  // Tokens that parse_special may cut out of the text: control, user-defined and unknown ones with a text.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }

  int32_t bos() const { return bos_; }  // -1 when absent
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // eos, eot, eom and the control tokens whose text conventionally ends a turn (<|eot_id|>, <|im_end|>, ...).
  bool is_end_of_generation(int32_t id) const;

  static bool is_text_type(TokenType type) {
    return type == TokenType::normal || type == TokenType::user_defined;
  }

 private:
  VocabModel model_ = VocabModel::spm;
  std::string pre_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;  // empty when the file has none
  std::vector<TokenType> types_;
  // The text -> id index: open addressing with linear probing over a power-of-two table. Flat, because
  // building and probing it for 100k+ tokens (and 3 lookups per merge) is most of the construction time.
  struct Slot {
    uint32_t tag;  // high half of the text's hash, to skip most string compares
    int32_t id;    // -1 when empty
  };
  void build_index();
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  std::vector<int32_t> special_tokens_;
  std::vector<int32_t> end_of_generation_;  // sorted
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace kvtrie
