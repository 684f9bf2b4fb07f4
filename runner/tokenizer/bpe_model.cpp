#include "runner/tokenizer/bpe_model.h"

#include <queue>

#include "base/error.h"
#include "runner/model/gguf_file.h"
#include "runner/tokenizer/utf8.h"

namespace kvtrie {
namespace {

bool maps_to_itself(uint32_t byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct ByteAlphabet {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; the alphabet ends below U+0144
  ByteAlphabet() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      to_char[b] = maps_to_itself(b) ? b : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

// A candidate merge of two adjacent symbols; stale once either side has changed.
struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
  // Lowest rank first, then leftmost: the order of the reference BPE.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

}  // namespace

char32_t byte_to_alphabet(uint8_t byte) {
  return alphabet().to_char[byte];
}

int alphabet_to_byte(char32_t code_point) {
  return code_point < alphabet().to_byte.size() ? alphabet().to_byte[code_point] : -1;
}

BpeModel BpeModel::build(const Vocab& vocab, const GgufFile& file, PreTokenizer pre) {
  BpeModel model;
  model.pre_ = pre;
  model.ignore_merges_ = pre == PreTokenizer::llama3;
  for (uint32_t b = 0; b < 256; ++b) {
    std::string text;
    utf8::append(text, byte_to_alphabet(static_cast<uint8_t>(b)));
    model.byte_token_[b] = vocab.find(text);
  }
  const std::vector<std::string>* merges = file.get_string_array("tokenizer.ggml.merges");
  if (merges == nullptr) {
    if (file.find("tokenizer.ggml.merges") != nullptr)
      throw InputError(file.path().string() + ": tokenizer.ggml.merges is not an array of strings");
    return model;  // a vocab without merges encodes byte by byte
  }
  int bits = 4;
  while ((uint64_t{1} << bits) < merges->size() * 2) ++bits;
  model.merges_.assign(uint64_t{1} << bits, Merge{kNoMerge, 0, 0});
  model.shift_ = 64 - bits;
  const uint64_t mask = model.merges_.size() - 1;
  std::string joined;
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string& line = (*merges)[rank];
    // The separator is the first space after the first character: a left part may itself be a space.
    const size_t split = line.find(' ', 1);
    if (split == std::string::npos)
      throw InputError(file.path().string() + ": merge " + std::to_string(rank) + " \"" + line +
                       "\" has no space separating its two parts");
    const std::string_view left(line.data(), split);
    const std::string_view right(line.data() + split + 1, line.size() - split - 1);
    const int32_t left_id = vocab.find(left);
    const int32_t right_id = vocab.find(right);
    if (left_id < 0 || right_id < 0)
      throw InputError(file.path().string() + ": merge " + std::to_string(rank) + " \"" + line +
                       "\" names a token that is not in the vocab");
    joined.assign(left);
    joined.append(right);
    const int32_t result = vocab.find(joined);
    if (result < 0) continue;  // cannot produce a token; the reference tokenizer cannot use it either
    const uint64_t key = pair_key(left_id, right_id);
    for (uint64_t slot = model.slot_of(key);; slot = (slot + 1) & mask) {
      Merge& merge = model.merges_[slot];
      if (merge.key == kNoMerge) {
        merge = {key, static_cast<int32_t>(rank), result};
        break;
      }
      if (merge.key == key) break;  // a repeated pair keeps its first (best) rank
    }
  }
  return model;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  if (merges_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  const uint64_t mask = merges_.size() - 1;
  for (uint64_t slot = slot_of(key);; slot = (slot + 1) & mask) {
    const Merge& merge = merges_[slot];
    if (merge.key == key) return &merge;
    if (merge.key == kNoMerge) return nullptr;
  }
}

void BpeModel::encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view word : pretokenize(text, pre_)) encode_word(vocab, word, out);
}

void BpeModel::encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    std::string mapped;
    for (char c : word) utf8::append(mapped, byte_to_alphabet(static_cast<uint8_t>(c)));
    if (const int32_t id = vocab.find_text_token(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Symbols form a doubly linked list over the word's bytes; a merge folds the right symbol into the left.
  const auto n = static_cast<int32_t>(word.size());
  std::vector<int32_t> ids(word.size()), next(word.size()), prev(word.size());
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = byte_token_[static_cast<uint8_t>(word[static_cast<size_t>(i)])];
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0 || ids[left] < 0 || ids[right] < 0) return;
    if (const Merge* merge = find_merge(ids[left], ids[right]))
      queue.push({merge->rank, left, right, ids[left], ids[right], merge->result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  constexpr int32_t kRemoved = -2;
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (ids[c.left] != c.left_id || next[c.left] != c.right || ids[c.right] != c.right_id) continue;
    ids[c.left] = c.result;
    ids[c.right] = kRemoved;
    next[c.left] = next[c.right];
    if (next[c.left] >= 0) prev[next[c.left]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) {
    if (ids[i] >= 0) {
      out.push_back(ids[i]);
    } else if (vocab.unk() >= 0) {
      out.push_back(vocab.unk());  // a byte whose alphabet character the vocab lacks
    }
  }
}

std::string BpeModel::piece(const Vocab& vocab, int32_t id) const {
  const std::string& text = vocab.text(id);
  switch (vocab.type(id)) {
    case TokenType::control:
    case TokenType::unknown:
    case TokenType::unused:
      return {};
    case TokenType::user_defined:
      return text;
    default:
      break;
  }
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Char c = utf8::decode(text, pos);
    const int byte = c.status == utf8::Status::ok ? alphabet_to_byte(c.code_point) : -1;
    if (byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
    } else {
      bytes.append(text, pos, c.length);  // not an alphabet character: keep it as written
    }
    pos += c.length;
  }
  return bytes;
}

}  // namespace kvtrie
