#include "runner/engine/request.h"

namespace kvtrie::engine {

int32_t Request::sample_and_emit(std::span<const float> logits, const std::vector<int32_t>& history) {
  const int32_t token = sample(logits, history);
  emit_sampled(token, logits);
  return token;
}

void Request::emit_sampled(int32_t token, std::span<const float> logits) {
  // The sampler does not modify the logits: logprobs are of the raw row.
  std::optional<TokenLogprob> lp;
  if (params.logprobs > 0) lp = make_token_logprob(logits, token, params.logprobs);
  emit(token, std::move(lp));
}

void Request::emit(int32_t token, std::optional<TokenLogprob> logprob) {
  if (!first_token) first_token = Clock::now();
  Chunk chunk = generation->accept(token, std::move(logprob));
  if (!chunk.tokens.empty() || !chunk.text.empty()) channel->push(std::move(chunk));
}

}  // namespace kvtrie::engine
