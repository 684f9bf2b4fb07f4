// Contract: finds special tokens (control, user-defined and unknown tokens with a text) inside text, for
// encode with parse_special. Scans once, left to right; where several special tokens start at the same byte
// the longest wins. Built once from a Vocab; immutable afterwards and safe from any thread.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runner/tokenizer/vocab.h"

namespace kvtrie {

struct Fragment {
  std::string_view text;  // points into the input
  int32_t token;          // the special token this fragment is, or -1 for plain text
};

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // The text cut into plain-text and special-token fragments, in order; empty plain fragments are left out.
  std::vector<Fragment> split(const Vocab& vocab, std::string_view text) const;

 private:
  // Candidates by first byte, longest first.
  std::array<std::vector<int32_t>, 256> by_first_byte_;
};

}  // namespace kvtrie
