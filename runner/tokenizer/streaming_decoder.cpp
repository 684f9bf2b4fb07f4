#include "runner/tokenizer/tokenizer.h"
#include "runner/tokenizer/utf8.h"

namespace kvtrie {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool at_text_start)
    : tokenizer_(&tokenizer), strip_space_(at_text_start && tokenizer.strips_leading_space()) {}

std::string StreamingDecoder::push(int32_t id) {
  std::string piece = tokenizer_->token_piece(id);
  if (strip_space_) {
    // The rule of Tokenizer::decode: the first token after an optional leading BOS loses a leading space.
    if (!(first_token_ && id == tokenizer_->bos())) {
      if (!piece.empty() && piece[0] == ' ') piece.erase(0, 1);
      strip_space_ = false;
    }
  }
  first_token_ = false;
  pending_ += piece;

  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Char c = utf8::decode(pending_, pos);
    if (c.status == utf8::Status::truncated) break;  // wait for the rest of this character
    if (c.status == utf8::Status::ok) {
      out.append(pending_, pos, c.length);
    } else {
      utf8::append(out, 0xFFFD);
    }
    pos += c.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out = utf8::to_valid(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvtrie
