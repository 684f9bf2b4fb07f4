// Contract: the pre-tokenizers of byte-level BPE vocabularies, which cut text into words before merging.
// Each is the hand-written equivalent of its reference regular expression, run over code points with Unicode
// categories from ICU. Pure functions, safe from any thread. Bytes that are not valid UTF-8 count as one
// "other" character each, so the words always cover the input exactly, byte for byte.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace kvtrie {

enum class PreTokenizer : uint8_t {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
  // \s+(?!\S)|\s+
  llama3,
  // as llama3, with single digits (\p{N} instead of \p{N}{1,3})
  qwen2,
};

// Maps tokenizer.ggml.pre to a pre-tokenizer; nullopt for a name this project does not implement.
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// The words of text, in order; their concatenation is exactly text. Views point into text.
std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer kind);

}  // namespace kvtrie
