// Contract: the engine-independent part of one request's output, shared by every engine so that they all
// detokenize, stop and report the same way. A Generation is fed each sampled token in order (accept) and
// returns the Chunk to push to the client: the token ids, their logprobs when asked, and the text that became
// final -- complete UTF-8 only (a partial multi-byte character is held back by the tokenizer's streaming
// decoder) and never any part of a stop string (text that could still grow into a stop string is held back
// until it cannot). It decides when generation ends: an end-of-generation token (not emitted, not counted),
// a stop string (the matching token is emitted in `tokens`, the text from the match on is not), max_tokens or
// the context size. finish() flushes and builds the final chunk from engine timings. One Generation per
// request, used by one thread at a time (the engine thread); the Tokenizer must outlive it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runner/engine/generation_stream.h"

namespace kvtrie {
class Tokenizer;
}

namespace kvtrie::engine {

struct GenerateRequest;

// log-softmax of raw logits (before any sampling transform): the chosen token's logprob and the `top_n` most
// likely tokens (ties: lower id first). logits must not be empty and token must index them.
TokenLogprob make_token_logprob(std::span<const float> logits, int32_t token, uint32_t top_n);

// Finds the earliest occurrence of any stop string in `text`: its position and the index of the string.
struct StopMatch {
  size_t position = 0;
  size_t stop_index = 0;
};
std::optional<StopMatch> find_stop(std::string_view text, const std::vector<std::string>& stops);
// Length of the longest suffix of `text` that is a proper prefix of some stop string (text to hold back).
size_t stop_prefix_overlap(std::string_view text, const std::vector<std::string>& stops);

class Generation {
 public:
  // n_ctx: tokens per sequence; generation ends with Length when prompt + generated would exceed it.
  Generation(const Tokenizer& tokenizer, const GenerateRequest& request, uint32_t n_ctx);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Feeds the next sampled token (with its logprob entry when the request asked for logprobs). Returns what
  // to push now (may carry no text). Must not be called once done().
  Chunk accept(int32_t token, std::optional<TokenLogprob> logprob);
  bool done() const { return stop_.has_value(); }
  // Why it ended; nullopt while running.
  std::optional<StopKind> stop_kind() const { return stop_; }

  // The final chunk: any held-back text (unless a stop string ended the run), and stats with stop_kind,
  // completion_tokens and prompt_tokens filled in from this Generation (pass the engine's timings and cache
  // counts in `stats`). When the run has not ended, it ended by `reason` (Cancelled, or Length on shutdown).
  Chunk finish(GenerationStats stats, StopKind reason = StopKind::Cancelled);

  // Tokens generated so far, EOS excluded (for repeat penalties and the KV append).
  const std::vector<int32_t>& generated() const { return generated_; }
  uint32_t completion_tokens() const { return static_cast<uint32_t>(generated_.size()); }

 private:
  std::string take_emittable();

  const Tokenizer& tokenizer_;
  struct Decoder;
  std::unique_ptr<Decoder> decoder_;
  std::vector<std::string> stops_;
  bool ignore_eos_ = false;
  uint32_t max_tokens_ = 0;  // already clamped to the context
  uint32_t prompt_tokens_ = 0;
  std::string pending_;  // decoded text not yet emitted (held back for stop strings)
  std::string stop_string_;
  std::vector<int32_t> generated_;
  std::optional<StopKind> stop_;
};

}  // namespace kvtrie::engine
