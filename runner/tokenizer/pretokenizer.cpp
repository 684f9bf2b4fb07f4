#include "runner/tokenizer/pretokenizer.h"

#include <unicode/uchar.h>

#include <array>
#include <cstdint>

#include "runner/tokenizer/utf8.h"

namespace kvtrie {
namespace {

enum class Class : uint8_t { letter, number, space, other };

Class classify(char32_t cp) {
  if (u_isUWhiteSpace(static_cast<UChar32>(cp))) return Class::space;
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return Class::letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return Class::number;
    default:
      return Class::other;
  }
}

// ASCII dominates real text; a table avoids an ICU call per character.
const std::array<Class, 128>& ascii_classes() {
  static const std::array<Class, 128> table = [] {
    std::array<Class, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = classify(c);
    return t;
  }();
  return table;
}

struct Chars {
  std::vector<char32_t> cp;  // U+FFFD for an invalid byte
  std::vector<Class> cls;
  std::vector<uint32_t> offset;  // byte offset of each character; offset[size] == text.size()
};

Chars decode_chars(std::string_view text) {
  const auto& ascii = ascii_classes();
  Chars chars;
  chars.cp.reserve(text.size());
  chars.cls.reserve(text.size());
  chars.offset.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Char c = utf8::decode(text, pos);
    // A truncated tail is as invalid as a stray byte: take one byte at a time.
    const uint32_t length = c.status == utf8::Status::ok ? c.length : 1;
    chars.cp.push_back(c.code_point);
    chars.cls.push_back(c.status != utf8::Status::ok ? Class::other
                        : c.code_point < 128         ? ascii[c.code_point]
                                                     : classify(c.code_point));
    chars.offset.push_back(static_cast<uint32_t>(pos));
    pos += length;
  }
  chars.offset.push_back(static_cast<uint32_t>(text.size()));
  return chars;
}

class Splitter {
 public:
  Splitter(std::string_view text, PreTokenizer kind) : text_(text), kind_(kind), chars_(decode_chars(text)) {}

  std::vector<std::string_view> run() {
    std::vector<std::string_view> words;
    const size_t n = chars_.cp.size();
    for (size_t i = 0; i < n;) {
      const size_t end = kind_ == PreTokenizer::gpt2 ? match_gpt2(i) : match_llama3(i);
      words.push_back(text_.substr(chars_.offset[i], chars_.offset[end] - chars_.offset[i]));
      i = end;
    }
    return words;
  }

 private:
  size_t size() const { return chars_.cp.size(); }
  bool is(size_t i, Class c) const { return i < size() && chars_.cls[i] == c; }
  bool is_char(size_t i, char32_t c) const { return i < size() && chars_.cp[i] == c; }
  bool is_newline(size_t i) const { return is_char(i, '\r') || is_char(i, '\n'); }
  size_t skip(size_t i, Class c) const {
    while (is(i, c)) ++i;
    return i;
  }

  // 's 't 're 've 'm 'll 'd: the length in characters of the match at i, or 0.
  size_t contraction(size_t i, bool ignore_case) const {
    if (!is_char(i, '\'') || i + 1 >= size()) return 0;
    auto lower = [&](size_t k) -> char32_t {
      if (k >= size()) return 0;
      const char32_t c = chars_.cp[k];
      return ignore_case && c >= 'A' && c <= 'Z' ? c + 32 : c;
    };
    const char32_t a = lower(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    const char32_t b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // \s+(?!\S)|\s+ at a whitespace run [i, run_end): the lookahead gives back the last space before a
  // non-space so that it can prefix the next word.
  size_t trailing_space(size_t i, size_t run_end) const {
    if (run_end == size() || run_end - i == 1) return run_end;
    return run_end - 1;
  }

  size_t match_gpt2(size_t i) const {
    if (const size_t k = contraction(i, false)) return i + k;
    const size_t body = is_char(i, ' ') && i + 1 < size() && !is(i + 1, Class::space) ? i + 1 : i;
    if (is(body, Class::letter)) return skip(body, Class::letter);
    if (is(body, Class::number)) return skip(body, Class::number);
    if (is(body, Class::other)) return skip(body, Class::other);
    return trailing_space(i, skip(i, Class::space));
  }

  size_t match_llama3(size_t i) const {
    if (const size_t k = contraction(i, true)) return i + k;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (is(i, Class::letter)) return skip(i, Class::letter);
    if (!is(i, Class::number) && !is_newline(i) && is(i + 1, Class::letter))
      return skip(i + 1, Class::letter);
    // \p{N}{1,3} (qwen2: \p{N})
    if (is(i, Class::number)) {
      const size_t limit = kind_ == PreTokenizer::llama3 ? 3 : 1;
      size_t j = i + 1;
      while (j - i < limit && is(j, Class::number)) ++j;
      return j;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t body = is_char(i, ' ') && is(i + 1, Class::other) ? i + 1 : i;
    if (is(body, Class::other)) {
      size_t j = skip(body, Class::other);
      while (is_newline(j)) ++j;
      return j;
    }
    // Whitespace from here on. \s*[\r\n]+ ends after the last newline of the run.
    const size_t run_end = skip(i, Class::space);
    for (size_t j = run_end; j > i; --j)
      if (is_newline(j - 1)) return j;
    return trailing_space(i, run_end);
  }

  std::string_view text_;
  PreTokenizer kind_;
  Chars chars_;
};

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") return PreTokenizer::llama3;
  if (name == "qwen2") return PreTokenizer::qwen2;
  if (name.empty() || name == "default" || name == "gpt-2" || name == "gpt2") return PreTokenizer::gpt2;
  return std::nullopt;
}

std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer kind) {
  return Splitter(text, kind).run();
}

}  // namespace kvtrie
