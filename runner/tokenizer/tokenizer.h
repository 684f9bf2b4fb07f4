// Contract: text <-> token ids for a model, built from the GGUF tokenizer metadata (tokenizer.ggml.*):
// SentencePiece ("llama") or byte-level BPE ("gpt2" with the gpt-2, llama3 or qwen2 pre-tokenizer).
// A Tokenizer owns all its tables (the GgufFile need not outlive it), is immutable after from_gguf and may be
// used from any number of threads at once. A StreamingDecoder belongs to one stream and one thread; its
// Tokenizer must outlive it.
//
// Losslessness: decode(encode(x)) == x for any bytes x with byte-level BPE; with SentencePiece for any x that
// holds no U+2581 (it decodes as a space) when the vocab has the 256 byte tokens. Special tokens are cut out
// of the text only when parse_special is set (else "<s>" is plain text), user-defined ones included
// (llama.cpp always cuts those out); control tokens decode to nothing unless render_special is set. An
// unknown tokenizer.ggml.pre falls back to the gpt-2 rules with a logged warning.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runner/tokenizer/bpe_model.h"
#include "runner/tokenizer/special_tokens.h"
#include "runner/tokenizer/spm_model.h"
#include "runner/tokenizer/vocab.h"

namespace kvtrie {

class GgufFile;

struct EncodeOptions {
  bool add_bos = false;  // prepend bos() (ignored when the vocab has none)
  bool add_eos = false;  // append eos()
  bool parse_special = false;
};

class Tokenizer {
 public:
  // Throws InputError (naming the file) on a missing, broken or unsupported vocab.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);

  // add_special adds BOS/EOS as the vocab's add_bos_token/add_eos_token say.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const;

  // The raw bytes a token contributes to decoded text (may be part of a multi-byte character); "" for
  // control tokens and for ids outside the vocab.
  std::string token_piece(int32_t id) const;
  // The token's text as written in the vocab ("<|eot_id|>", "▁the", "Ġthe"); "" for ids outside the vocab.
  std::string_view token_text(int32_t id) const;
  // The token whose vocab text is exactly text, or -1 (for looking up template markers such as "<|im_end|>").
  int32_t find_token(std::string_view text) const { return vocab_.find(text); }

  // Decodes a whole text: the bytes of the pieces, except that with SentencePiece's dummy space prefix the
  // space that encode put in front of the text (the first piece after an optional leading BOS) is removed.
  // Ids outside the vocab decode to nothing. The result may hold invalid UTF-8 if the tokens do.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  int32_t n_vocab() const { return vocab_.size(); }
  int32_t bos() const { return vocab_.bos(); }  // -1 when absent
  int32_t eos() const { return vocab_.eos(); }  // -1 when absent
  bool add_bos_default() const { return vocab_.add_bos(); }
  // eos, eot and eom ids, and control tokens that end a turn in the common chat formats.
  bool is_end_of_generation(int32_t id) const { return vocab_.is_end_of_generation(id); }
  VocabModel model() const { return vocab_.model(); }
  // Whether decode drops the space encode put in front of a text (SentencePiece's add_space_prefix).
  bool strips_leading_space() const { return vocab_.model() == VocabModel::spm && vocab_.add_space_prefix(); }

 private:
  Tokenizer(Vocab vocab, const GgufFile& file);
  void encode_plain(std::string_view text, bool after_special_or_start, std::vector<int32_t>& out) const;

  Vocab vocab_;
  SpecialTokenMatcher specials_;
  std::unique_ptr<SpmModel> spm_;  // exactly one of spm_ and bpe_ is set
  std::unique_ptr<BpeModel> bpe_;
  std::vector<std::string> pieces_;  // token_piece of every id, computed once
};

// Turns a stream of token ids into text that is always complete UTF-8: a multi-byte character split across
// tokens is held back until its last byte arrives. Bytes that cannot start or continue a character are
// emitted as U+FFFD. Not thread-safe; one per stream. The Tokenizer must outlive it.
class StreamingDecoder {
 public:
  // at_text_start: the ids begin a text (apply decode()'s leading-space rule); false for a continuation
  // such as generated tokens after a prompt.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool at_text_start = false);

  // The text completed by this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held back (an unfinished character), as U+FFFD; the decoder can be reused afterwards.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;      // bytes of an incomplete trailing character
  bool strip_space_;         // the next text-bearing piece loses a leading space
  bool first_token_ = true;  // a leading BOS does not end the leading-space rule
};

}  // namespace kvtrie
