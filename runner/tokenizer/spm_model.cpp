#include "runner/tokenizer/spm_model.h"

#include <cstdio>
#include <queue>

#include "runner/tokenizer/utf8.h"

namespace kvtrie {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

struct Symbol {
  uint32_t start;   // byte offset in the escaped text
  uint32_t length;  // bytes; 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

// A candidate merge of two adjacent symbols; stale once either side has changed length.
struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // of the merged text
  // Highest score first, then leftmost: the order of SentencePiece's BPE.
  bool operator<(const Candidate& other) const {
    return score != other.score ? score < other.score : left > other.left;
  }
};

}  // namespace

SpmModel SpmModel::build(const Vocab& vocab) {
  SpmModel model;
  model.byte_token_.fill(-1);
  model.words_are_independent_ = true;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (Vocab::is_text_type(vocab.type(id))) {
      // A token with U+2581 after another character (not after U+2581) would let a merge cross a word start.
      const std::string& text = vocab.text(id);
      for (size_t pos = text.find(kSpaceMark, 1); pos != std::string::npos;
           pos = text.find(kSpaceMark, pos + 1)) {
        if (pos < kSpaceMark.size() ||
            text.compare(pos - kSpaceMark.size(), kSpaceMark.size(), kSpaceMark) != 0) {
          model.words_are_independent_ = false;
          break;
        }
      }
    }
    if (vocab.type(id) != TokenType::byte) continue;
    const std::string& text = vocab.text(id);
    unsigned value = 0;
    if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X>", &value) == 1 && value < 256)
      model.byte_token_[value] = id;
  }
  return model;
}

void SpmModel::encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const {
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(kSpaceMark);
    } else {
      escaped.push_back(c);
    }
  }
  if (!words_are_independent_) {
    encode_segment(vocab, escaped, out);
    return;
  }
  // Cut before every U+2581 that follows another character: no token spans such a cut (checked in build),
  // so the words merge independently and the priority queue stays small and cache-resident.
  const std::string_view all(escaped);
  size_t start = 0;
  for (size_t pos = all.find(kSpaceMark, 1); pos != std::string_view::npos;
       pos = all.find(kSpaceMark, pos + 1)) {
    if (pos >= kSpaceMark.size() && all.substr(pos - kSpaceMark.size(), kSpaceMark.size()) == kSpaceMark)
      continue;
    encode_segment(vocab, all.substr(start, pos - start), out);
    start = pos;
  }
  encode_segment(vocab, all.substr(start), out);
}

void SpmModel::encode_segment(const Vocab& vocab, std::string_view all, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(all.size());
  for (size_t pos = 0; pos < all.size();) {
    const utf8::Char c = utf8::decode(all, pos);
    const uint32_t length = c.status == utf8::Status::ok ? c.length : 1;  // an invalid byte stands alone
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), length, index - 1, index + 1});
    pos += length;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const int32_t id = vocab.find_text_token(all.substr(symbols[left].start, length));
    if (id >= 0) queue.push({vocab.score(id), left, right, length});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.length == 0 || right.length == 0 || left.next != c.right ||
        left.length + right.length != c.length)
      continue;
    left.length = c.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = all.substr(symbols[i].start, symbols[i].length);
    if (const int32_t id = vocab.find_text_token(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = byte_token_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (vocab.unk() >= 0) {
        out.push_back(vocab.unk());
      }
    }
  }
}

std::string SpmModel::piece(const Vocab& vocab, int32_t id) const {
  switch (vocab.type(id)) {
    case TokenType::control:
    case TokenType::unused:
      return {};
    case TokenType::unknown:
      return " \xE2\x81\x87 ";
    case TokenType::byte:
      for (int b = 0; b < 256; ++b)
        if (byte_token_[static_cast<size_t>(b)] == id) return std::string(1, static_cast<char>(b));
      return {};
    default:
      break;
  }
  const std::string& text = vocab.text(id);
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      pos += kSpaceMark.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

}  // namespace kvtrie
