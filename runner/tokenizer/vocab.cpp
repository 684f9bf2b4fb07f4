#include "runner/tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <functional>
#include <optional>

#include "base/error.h"
#include "runner/model/gguf_file.h"

namespace kvtrie {
namespace {

[[noreturn]] void fail(const GgufFile& file, const std::string& problem) {
  throw InputError(file.path().string() + ": broken tokenizer vocab: " + problem);
}

// Control tokens that end a turn in the common chat formats. Files often name only one of them as eos, but a
// model may emit any (Llama 3 instruct ends with <|eot_id|>, Qwen chat with <|im_end|>, Phi-3 with <|end|>).
constexpr std::array<std::string_view, 9> kEndOfTurnTexts = {
    "<|eot_id|>",    "<|eom_id|>",      "<|im_end|>", "<|end|>",    "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "</s>",       "<|return|>",
};

bool looks_like_byte_token(std::string_view text) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return text.size() == 6 && text.substr(0, 3) == "<0x" && hex(text[3]) && hex(text[4]) && text[5] == '>';
}

// A token id key: absent, or the all-ones "none" sentinel some converters write, gives -1; anything else must
// name a token.
int32_t read_token_id(const GgufFile& file, std::string_view key, int32_t n_vocab) {
  const GgufEntry* entry = file.find(key);
  if (entry == nullptr) return -1;
  if (const auto value = file.get_int(key)) {
    if (*value == -1 || *value == 0xFFFFFFFF) return -1;
    if (*value >= 0 && *value < n_vocab) return static_cast<int32_t>(*value);
  } else if (const auto unsigned_value = file.get_uint(key)) {
    if (*unsigned_value == UINT64_MAX) return -1;
  } else {
    fail(file, std::string(key) + " is not an integer");
  }
  fail(file, std::string(key) + " is not a token id below the vocab size " + std::to_string(n_vocab));
}

bool read_flag(const GgufFile& file, std::string_view key, bool fallback) {
  if (file.find(key) == nullptr) return fallback;
  const auto value = file.get_bool(key);
  if (!value) fail(file, std::string(key) + " is not a bool");
  return *value;
}

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& file) {
  Vocab vocab;
  const auto model = file.get_string("tokenizer.ggml.model");
  if (!model) fail(file, "tokenizer.ggml.model is missing");
  if (*model == "llama") {
    vocab.model_ = VocabModel::spm;
  } else if (*model == "gpt2") {
    vocab.model_ = VocabModel::bpe;
  } else {
    fail(file, "tokenizer.ggml.model \"" + std::string(*model) + "\" is not supported (llama, gpt2)");
  }
  if (const auto pre = file.get_string("tokenizer.ggml.pre")) vocab.pre_ = std::string(*pre);

  const std::vector<std::string>* texts = file.get_string_array("tokenizer.ggml.tokens");
  if (texts == nullptr || texts->empty()) fail(file, "tokenizer.ggml.tokens is missing or empty");
  if (texts->size() > static_cast<size_t>(INT32_MAX)) fail(file, "too many tokens");
  vocab.texts_ = *texts;
  const size_t n = vocab.texts_.size();

  if (file.find("tokenizer.ggml.scores") != nullptr) {
    const auto scores = file.get_float_array("tokenizer.ggml.scores");
    if (!scores || scores->size() != n) fail(file, "tokenizer.ggml.scores does not hold one float per token");
    vocab.scores_.assign(scores->begin(), scores->end());
  }
  vocab.types_.assign(n, TokenType::normal);
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    const auto types = file.get_int_array("tokenizer.ggml.token_type");
    if (!types || types->size() != n) fail(file, "tokenizer.ggml.token_type does not hold one int per token");
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > 6) fail(file, "token " + std::to_string(i) + " has unknown type " + std::to_string(t));
      vocab.types_[i] = static_cast<TokenType>(t);
    }
  } else {
    for (size_t i = 0; i < n; ++i)
      if (looks_like_byte_token(vocab.texts_[i])) vocab.types_[i] = TokenType::byte;
  }

  vocab.build_index();
  for (size_t i = 0; i < n; ++i) {
    const TokenType type = vocab.types_[i];
    if ((type == TokenType::control || type == TokenType::user_defined || type == TokenType::unknown) &&
        !vocab.texts_[i].empty())
      vocab.special_tokens_.push_back(static_cast<int32_t>(i));
  }

  const auto n_vocab = static_cast<int32_t>(n);
  vocab.bos_ = read_token_id(file, "tokenizer.ggml.bos_token_id", n_vocab);
  vocab.eos_ = read_token_id(file, "tokenizer.ggml.eos_token_id", n_vocab);
  vocab.unk_ = read_token_id(file, "tokenizer.ggml.unknown_token_id", n_vocab);
  const int32_t eot = read_token_id(file, "tokenizer.ggml.eot_token_id", n_vocab);
  const int32_t eom = read_token_id(file, "tokenizer.ggml.eom_token_id", n_vocab);
  for (int32_t id : {vocab.eos_, eot, eom})
    if (id >= 0) vocab.end_of_generation_.push_back(id);
  for (std::string_view text : kEndOfTurnTexts) {
    const int32_t id = vocab.find(text);
    if (id >= 0 && vocab.type(id) == TokenType::control) vocab.end_of_generation_.push_back(id);
  }
  std::sort(vocab.end_of_generation_.begin(), vocab.end_of_generation_.end());

  // Defaults follow the reference tokenizers: SentencePiece adds BOS and a dummy space prefix; of the
  // byte-level families only Llama 3 adds BOS.
  const bool spm = vocab.model_ == VocabModel::spm;
  const bool llama3 = vocab.pre_ == "llama3" || vocab.pre_ == "llama-v3" || vocab.pre_ == "llama-bpe";
  // A default never asks for a token the vocab lacks; an explicit flag that does is a broken file.
  vocab.add_bos_ = read_flag(file, "tokenizer.ggml.add_bos_token", (spm || llama3) && vocab.bos_ >= 0);
  vocab.add_eos_ = read_flag(file, "tokenizer.ggml.add_eos_token", false);
  vocab.add_space_prefix_ = read_flag(file, "tokenizer.ggml.add_space_prefix", spm);
  if (vocab.add_bos_ && vocab.bos_ < 0) fail(file, "add_bos_token is set but there is no bos_token_id");
  if (vocab.add_eos_ && vocab.eos_ < 0) fail(file, "add_eos_token is set but there is no eos_token_id");
  return vocab;
}

void Vocab::build_index() {
  size_t capacity = 16;
  while (capacity < texts_.size() * 2) capacity *= 2;
  slots_.assign(capacity, Slot{0, -1});
  mask_ = capacity - 1;
  for (size_t i = 0; i < texts_.size(); ++i) {
    const uint64_t hash = std::hash<std::string_view>{}(texts_[i]);
    const auto tag = static_cast<uint32_t>(hash >> 32);
    for (uint64_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
      Slot& slot = slots_[pos];
      if (slot.id < 0) {
        slot = {tag, static_cast<int32_t>(i)};
        break;
      }
      if (slot.tag == tag && texts_[static_cast<size_t>(slot.id)] == texts_[i]) {
        // On a duplicate text, keep the token plain text can produce.
        if (!is_text_type(types_[static_cast<size_t>(slot.id)]) && is_text_type(types_[i]))
          slot.id = static_cast<int32_t>(i);
        break;
      }
    }
  }
}

int32_t Vocab::find(std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint64_t hash = std::hash<std::string_view>{}(text);
  const auto tag = static_cast<uint32_t>(hash >> 32);
  for (uint64_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
    const Slot& slot = slots_[pos];
    if (slot.id < 0) return -1;
    if (slot.tag == tag && texts_[static_cast<size_t>(slot.id)] == text) return slot.id;
  }
}

int32_t Vocab::find_text_token(std::string_view text) const {
  const int32_t id = find(text);
  return id >= 0 && is_text_type(type(id)) ? id : -1;
}

bool Vocab::is_end_of_generation(int32_t id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

}  // namespace kvtrie
