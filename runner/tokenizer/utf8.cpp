#include "runner/tokenizer/utf8.h"

namespace kvtrie::utf8 {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_continuation(unsigned char byte) {
  return (byte & 0xC0) == 0x80;
}

}  // namespace

Char decode(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {Status::ok, lead, 1};
  uint32_t length = 0;
  char32_t cp = 0;
  // The allowed range of the second byte encodes the overlong, surrogate and > U+10FFFF rules (Unicode table
  // 3-7).
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    cp = lead & 0x0F;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    cp = lead & 0x07;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return {Status::invalid, kReplacement, 1};
  }
  for (uint32_t i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return {Status::truncated, kReplacement, i};
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    const bool in_range = i == 1 ? (byte >= second_min && byte <= second_max) : is_continuation(byte);
    if (!in_range) return {Status::invalid, kReplacement, 1};
    cp = (cp << 6) | (byte & 0x3F);
  }
  return {Status::ok, cp, length};
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_valid(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Char c = decode(text, pos);
    if (c.status == Status::ok) {
      out.append(text.substr(pos, c.length));
    } else {
      append(out, kReplacement);
    }
    pos += c.length;
  }
  return out;
}

bool is_valid(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Char c = decode(text, pos);
    if (c.status != Status::ok) return false;
    pos += c.length;
  }
  return true;
}

}  // namespace kvtrie::utf8
