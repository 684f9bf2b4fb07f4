// Contract: small UTF-8 helpers shared by the tokenizers and the streaming decoder. Pure functions over byte
// strings; no state, safe from any thread. Invalid input never throws: it is reported per byte so callers can
// stay lossless (tokenizers keep the raw byte) or replace it (U+FFFD for text handed to users).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtrie::utf8 {

enum class Status : uint8_t {
  ok,         // a complete, well-formed character
  invalid,    // the byte at the position starts no well-formed character (length is 1)
  truncated,  // a well-formed prefix of a character that runs past the end of the input
};

struct Char {
  Status status;
  char32_t code_point;  // U+FFFD unless status is ok
  uint32_t
      length;  // bytes consumed: the character's length when ok, else 1 (invalid) or the prefix (truncated)
};

// Decodes the character starting at text[pos] (pos < text.size()). Rejects overlong forms, surrogates and
// code points above U+10FFFF, as the Unicode standard requires.
Char decode(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of a code point (<= U+10FFFF, not a surrogate).
void append(std::string& out, char32_t code_point);

// The text with every invalid byte (and a truncated tail) replaced by U+FFFD.
std::string to_valid(std::string_view text);

// True when the whole text is well-formed UTF-8.
bool is_valid(std::string_view text);

}  // namespace kvtrie::utf8
