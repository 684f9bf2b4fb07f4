#include "runner/tokenizer/tokenizer.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "runner/model/gguf_file.h"

namespace kvtrie {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(Vocab::from_gguf(file), file));
}

Tokenizer::Tokenizer(Vocab vocab, const GgufFile& file) : vocab_(std::move(vocab)), specials_(vocab_) {
  if (vocab_.model() == VocabModel::spm) {
    spm_ = std::make_unique<SpmModel>(SpmModel::build(vocab_));
  } else {
    auto pre = pre_tokenizer_from_name(vocab_.pre());
    if (!pre) {
      // Many families reuse one of the three rules with small changes; gpt-2's is the common ancestor.
      spdlog::warn(
          "{}: pre-tokenizer \"{}\" is not implemented; using the gpt-2 rules, so tokens may differ "
          "from the model's reference tokenizer",
          file.path().string(), vocab_.pre());
      pre = PreTokenizer::gpt2;
    }
    bpe_ = std::make_unique<BpeModel>(BpeModel::build(vocab_, file, *pre));
  }
  pieces_.reserve(static_cast<size_t>(vocab_.size()));
  for (int32_t id = 0; id < vocab_.size(); ++id)
    pieces_.push_back(spm_ ? spm_->piece(vocab_, id) : bpe_->piece(vocab_, id));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode(
      text, EncodeOptions{add_special && vocab_.add_bos(), add_special && vocab_.add_eos(), parse_special});
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_bos && vocab_.bos() >= 0) out.push_back(vocab_.bos());
  if (options.parse_special) {
    bool after_special_or_start = true;
    for (const Fragment& fragment : specials_.split(vocab_, text)) {
      if (fragment.token >= 0) {
        out.push_back(fragment.token);
        after_special_or_start = true;
      } else {
        encode_plain(fragment.text, after_special_or_start, out);
        after_special_or_start = false;
      }
    }
  } else if (!text.empty()) {
    encode_plain(text, true, out);
  }
  if (options.add_eos && vocab_.eos() >= 0) out.push_back(vocab_.eos());
  return out;
}

void Tokenizer::encode_plain(std::string_view text, bool after_special_or_start,
                             std::vector<int32_t>& out) const {
  if (bpe_) {
    bpe_->encode(vocab_, text, out);
    return;
  }
  // SentencePiece's dummy prefix: the text (and, as in llama.cpp, each plain span after a special token)
  // starts with a space, so that a first word is tokenized like any other.
  if (vocab_.add_space_prefix() && after_special_or_start) {
    std::string prefixed;
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    spm_->encode(vocab_, prefixed, out);
  } else {
    spm_->encode(vocab_, text, out);
  }
}

std::string Tokenizer::token_piece(int32_t id) const {
  return vocab_.contains(id) ? pieces_[static_cast<size_t>(id)] : std::string();
}

std::string_view Tokenizer::token_text(int32_t id) const {
  return vocab_.contains(id) ? std::string_view(vocab_.text(id)) : std::string_view();
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  size_t strip_at = ids.size();  // index of the token that loses its leading space
  if (strips_leading_space() && !ids.empty()) strip_at = ids[0] == vocab_.bos() && ids.size() > 1 ? 1 : 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (!vocab_.contains(id)) continue;
    const std::string_view piece = render_special && vocab_.type(id) == TokenType::control
                                       ? std::string_view(vocab_.text(id))
                                       : std::string_view(pieces_[static_cast<size_t>(id)]);
    out.append(i == strip_at && piece.starts_with(' ') ? piece.substr(1) : piece);
  }
  return out;
}

}  // namespace kvtrie
