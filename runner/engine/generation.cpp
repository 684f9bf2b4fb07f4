#include "runner/engine/generation.h"

#include <algorithm>

#include "base/error.h"
#include "runner/engine/engine.h"
#include "runner/sampler.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::engine {

TokenLogprob make_token_logprob(std::span<const float> logits, int32_t token, uint32_t top_n) {
  KVTRIE_CHECK(!logits.empty(), "no logits");
  KVTRIE_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token outside the logits");
  TokenLogprob out;
  out.token = token;
  out.logprob = token_logprob(logits, token);
  for (const TokenProb& p : top_logprobs(logits, top_n)) out.top.push_back({p.token, p.logprob});
  return out;
}

std::optional<StopMatch> find_stop(std::string_view text, const std::vector<std::string>& stops) {
  std::optional<StopMatch> best;
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    size_t pos = text.find(stops[i]);
    if (pos != std::string_view::npos && (!best || pos < best->position)) best = StopMatch{pos, i};
  }
  return best;
}

size_t stop_prefix_overlap(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& stop : stops) {
    size_t max_len = std::min(text.size(), stop.empty() ? 0 : stop.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// The tokenizer's streaming decoder behind a pimpl, so this header does not depend on the tokenizer's.
struct Generation::Decoder {
  explicit Decoder(const Tokenizer& tokenizer) : stream(tokenizer) {}
  StreamingDecoder stream;
};

Generation::Generation(const Tokenizer& tokenizer, const GenerateRequest& request, uint32_t n_ctx)
    : tokenizer_(tokenizer),
      decoder_(std::make_unique<Decoder>(tokenizer)),
      stops_(request.stop),
      ignore_eos_(request.ignore_eos),
      prompt_tokens_(static_cast<uint32_t>(request.prompt.size())) {
  const uint32_t room = n_ctx > prompt_tokens_ ? n_ctx - prompt_tokens_ : 0;
  max_tokens_ =
      request.max_tokens < 0 ? room : std::min<uint32_t>(room, static_cast<uint32_t>(request.max_tokens));
  if (max_tokens_ == 0) stop_ = StopKind::Length;
}

Generation::~Generation() = default;

std::string Generation::take_emittable() {
  const size_t hold = stop_prefix_overlap(pending_, stops_);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

Chunk Generation::accept(int32_t token, std::optional<TokenLogprob> logprob) {
  KVTRIE_CHECK(!done(), "accept() after the generation ended");
  Chunk chunk;
  if (!ignore_eos_ && tokenizer_.is_end_of_generation(token)) {
    stop_ = StopKind::Eos;
    return chunk;
  }
  generated_.push_back(token);
  chunk.tokens.push_back(token);
  if (logprob) chunk.logprobs.push_back(std::move(*logprob));
  pending_ += decoder_->stream.push(token);
  if (auto match = find_stop(pending_, stops_)) {
    chunk.text = pending_.substr(0, match->position);
    stop_string_ = stops_[match->stop_index];
    pending_.clear();
    stop_ = StopKind::StopString;
    return chunk;
  }
  chunk.text = take_emittable();
  if (generated_.size() >= max_tokens_) stop_ = StopKind::Length;
  return chunk;
}

Chunk Generation::finish(GenerationStats stats, StopKind reason) {
  if (!stop_) stop_ = reason;
  Chunk last;
  if (*stop_ != StopKind::StopString) {
    // The run is over: text held back for a stop string that never came, and any incomplete character
    // (as U+FFFD, so what we hand out stays valid UTF-8), becomes final.
    pending_ += decoder_->stream.flush();
    last.text = std::move(pending_);
    pending_.clear();
  }
  stats.stop_kind = *stop_;
  stats.stop_string = stop_string_;
  stats.prompt_tokens = prompt_tokens_;
  stats.completion_tokens = completion_tokens();
  last.final = std::move(stats);
  return last;
}

}  // namespace kvtrie::engine
