#include "runner/tokenizer/special_tokens.h"

#include <algorithm>

namespace kvtrie {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  for (int32_t id : vocab.special_tokens())
    by_first_byte_[static_cast<uint8_t>(vocab.text(id)[0])].push_back(id);
  for (auto& ids : by_first_byte_)
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int32_t a, int32_t b) { return vocab.text(a).size() > vocab.text(b).size(); });
}

std::vector<Fragment> SpecialTokenMatcher::split(const Vocab& vocab, std::string_view text) const {
  std::vector<Fragment> fragments;
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[pos])];
    int32_t match = -1;
    for (int32_t id : candidates) {
      if (text.substr(pos).starts_with(vocab.text(id))) {
        match = id;
        break;
      }
    }
    if (match < 0) {
      ++pos;
      continue;
    }
    if (pos > plain_start) fragments.push_back({text.substr(plain_start, pos - plain_start), -1});
    const size_t length = vocab.text(match).size();
    fragments.push_back({text.substr(pos, length), match});
    pos += length;
    plain_start = pos;
  }
  if (plain_start < text.size()) fragments.push_back({text.substr(plain_start), -1});
  return fragments;
}

}  // namespace kvtrie
