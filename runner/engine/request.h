// Contract: Request is one generation request from submit to its end, the only object a request has. The
// RequestQueue creates it at submit and owns it until the engine thread takes it; from then on the engine's
// scheduler owns it (running, or waiting in the scheduler's own deque, preempted or not yet admitted) until
// it ends through RequestQueue::end, the one way a request ends. Fields below `submitted` are the output
// state, engine thread only; the channel is shared with the client's GenerationStream.
#pragma once
#include <chrono>
#include <memory>
#include <optional>

#include "runner/engine/engine.h"
#include "runner/engine/generation.h"
#include "runner/sampler.h"

namespace kvtrie::engine {

using Clock = std::chrono::steady_clock;

struct Request {
  GenerateRequest params;
  std::shared_ptr<StreamChannel> channel;
  Clock::time_point submitted;

  // Output state, engine thread only: set when its prompt first runs, kept across a preemption (its
  // generated tokens are not emitted again and its sampler continues its random sequence).
  std::unique_ptr<Generation> generation;  // null until the request starts
  std::unique_ptr<Sampler> sampler;
  double prompt_ms = 0;                          // computing the uncached prompt
  std::optional<Clock::time_point> first_token;  // when its first token was sampled

  // Engine thread: creates the Generation and Sampler (the request starts).
  void start_output(const Tokenizer& tokenizer, uint32_t n_ctx) {
    generation = std::make_unique<Generation>(tokenizer, params, n_ctx);
    sampler = std::make_unique<Sampler>(params.sampling);
  }
  // Engine thread: samples the next token from `logits` (`history`: the tokens so far, for penalties),
  // feeds it to the Generation and pushes what became final to the client. Returns the token.
  int32_t sample_and_emit(std::span<const float> logits, const std::vector<int32_t>& history);
  // The two halves of sample_and_emit: sample() touches nothing but this request's sampler (so the rows
  // of a step may be sampled on several threads at once); emit_sampled() then runs on the engine thread.
  int32_t sample(std::span<const float> logits, const std::vector<int32_t>& history) {
    return sampler->sample(logits, history);
  }
  void emit_sampled(int32_t token, std::span<const float> logits);
  // Whether its next token is the raw logits row's first largest with nothing else read from the row
  // (greedy, no penalty, no logprobs): the model may pick it on the GPU (Batch::greedy_only).
  bool wants_only_the_largest_logit() const {
    return params.logprobs == 0 && sampler->picks_the_largest_logit();
  }
  // How many of the row's best logits its next token is drawn from with nothing else read from the row
  // (top-k sampling, no penalty that can raise a logit, no logprobs; Sampler::top_entries_needed after
  // `history` tokens); 0: it needs the row. The model may read back only those (Batch::top_candidates), and
  // sample_top() draws from them.
  size_t top_entries_needed(size_t vocabulary, size_t history) const {
    return params.logprobs == 0 ? sampler->top_entries_needed(vocabulary, history) : 0;
  }
  int32_t sample_top(std::span<const int32_t> ids, std::span<const float> logits,
                     const std::vector<int32_t>& history) {
    return sampler->sample_top(ids, logits, history);
  }
  // Engine thread: as sample_and_emit, for a token picked without the row (GpuModel::greedy_tokens(), or
  // sample_top() over GpuModel::top_candidates()): no logprob.
  void emit_picked(int32_t token) { emit(token, std::nullopt); }

 private:
  void emit(int32_t token, std::optional<TokenLogprob> logprob);
};

}  // namespace kvtrie::engine
