// Contract: turning one row of logits into the next token. A Sampler belongs to one sequence: it holds that
// sequence's parameters, its seeded RNG and scratch buffers sized to the vocabulary on the first call (no
// allocation on later calls with the same vocabulary). It is not thread-safe: exactly one owner (the
// scheduler thread) calls it. It keeps no pointer to the spans it is given. The free functions below are pure
// and safe from any thread.
//
// The transform order is Ollama's (llama.cpp's common chain differs only in applying temperature last):
//   1. penalties over the last repeat_last_n of recent_tokens: repeat_penalty divides a positive logit and
//      multiplies a non-positive one; then frequency_penalty * count + presence_penalty is subtracted;
//   2. temperature <= 0: greedy argmax of the penalized logits (ties: lowest id); nothing below applies;
//   3. top_k (the k highest logits; ties broken toward the lower id);
//   4. softmax of logit / temperature over what is left;
//   5. typical_p (locally typical sampling): keep the tokens whose surprise -log p is closest to the entropy
//      of the distribution, closest first, until their probability reaches typical_p (at least one token;
//      ties by rank); it may drop the most likely token. Later steps renormalize over what is kept;
//   6. top_p: the smallest most-likely-first prefix whose probability reaches top_p (at least one token);
//   7. min_p: drop tokens whose probability is below min_p times the most likely kept one's;
//   8. draw with the RNG (std::mt19937_64; 53-bit uniform; cumulative scan in a fixed order), so a seed gives
//      the same tokens on every platform whose exp() agrees.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace kvtrie {

struct SamplingParams {
  float temperature = 0.8f;        // <= 0: greedy
  int32_t top_k = 40;              // <= 0 or >= vocabulary: disabled
  float top_p = 0.95f;             // >= 1: disabled; 0 keeps only the most likely token
  float min_p = 0.05f;             // <= 0: disabled
  float typical_p = 1.0f;          // >= 1: disabled; 0 keeps only the most typical token
  float repeat_penalty = 1.0f;     // 1: disabled; must be > 0
  int32_t repeat_last_n = 64;      // 0: no penalties; -1: all of recent_tokens
  float presence_penalty = 0.0f;   // subtracted once from every token present in the window
  float frequency_penalty = 0.0f;  // subtracted once per occurrence in the window
  std::optional<uint64_t> seed;    // nullopt: a random seed (Sampler::seed() reports it)
};

// Why `params` cannot be used (a message for a 400 answer), or nullopt when it is valid. The Sampler checks
// the same rules and throws kvtrie::Error, so callers facing user input validate first.
std::optional<std::string> validate(const SamplingParams& params);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // The next token id for `logits` (one value per vocabulary entry, not empty). `recent_tokens` is the
  // sequence so far, oldest first (ids outside the vocabulary are ignored); only its tail matters.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent_tokens);

  // How many of a row's best entries sample() needs, for a row of `vocabulary` logits after `history`
  // recent tokens, to draw the token it draws from the whole row; 0: it needs the row. Temperature above 0
  // and top-k on: top_k, plus the penalty window's length when penalties apply that can only lower a logit
  // (repeat_penalty >= 1, presence and frequency penalties >= 0): of the row's best top_k + window entries
  // at least top_k are outside the window, so every penalized token below them ranks after top_k of them.
  // A caller may then hand sample_top() the row's best entries instead of the row (GpuModel's top
  // candidates).
  size_t top_entries_needed(size_t vocabulary, size_t history) const;
  // sample() for a row given by its best entries in rank order (the larger logit first, the lower id among
  // equal ones, NaN read as -inf), at least top_entries_needed() of them, with the same recent tokens: the
  // same token from the same RNG draws. Throws kvtrie::Error when top_entries_needed() is 0 or more than
  // the entries.
  int32_t sample_top(std::span<const int32_t> ids, std::span<const float> logits,
                     std::span<const int32_t> recent_tokens);

  const SamplingParams& params() const { return params_; }
  // Whether sample() returns the raw row's first largest logit whatever the history: greedy, with no penalty
  // that applies. A caller may then take that token from elsewhere (the GPU's argmax of the row).
  bool picks_the_largest_logit() const;
  uint64_t seed() const { return seed_; }  // the seed in use, drawn at construction when none was given

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float weight;  // exp((logit - max) / temperature): the unnormalized probability
    float score;   // typical_p: distance of the token's surprise from the entropy (scratch)
  };

  struct Override {
    int32_t token;
    float logit;  // the penalized logit
  };

  // Whether any penalty applies (a non-neutral one over a window that is not empty by setting).
  bool penalizes() const;
  // Tokens in the penalty window after `history` recent tokens: the last repeat_last_n, or all of them.
  size_t window_length(size_t history) const;
  // The penalty window of recent_tokens, sorted, into window_.
  void load_window(std::span<const int32_t> recent_tokens);
  // A logit after the penalties of a token seen `occurrences` times in the window.
  float penalized(float logit, size_t occurrences) const;
  void collect_penalties(std::span<const float> logits, std::span<const int32_t> recent_tokens);
  // Calls run(begin, end) for each stretch of raw logits between the penalized tokens and
  // penalized(id, logit) for each penalized token, in id order.
  template <typename Run, typename Penalized>
  void for_each_run(std::span<const float> logits, Run&& run, Penalized&& penalized) const;
  // Calls fn(id, logit) for every token in id order, with penalties applied and NaN read as -inf.
  template <typename Fn>
  void for_each_logit(std::span<const float> logits, Fn&& fn) const;
  int32_t greedy(std::span<const float> logits) const;
  size_t select_top_k(std::span<const float> logits, size_t k);
  float offer_top_k(int32_t id, float logit, size_t k);  // returns the new worst kept logit
  // The shortest prefix of candidates_[0, count), ordered by `before`, whose weights reach `target`; sorts
  // that prefix. `presorted`: candidates_ is already in `before` order.
  template <typename Before>
  size_t prefix_reaching(size_t count, double target, Before before, bool presorted);
  // The shortest prefix of the sorted candidates_[0, prefix) whose weights, summed in order, reach
  // `target`; 0 when all of them fall short.
  size_t sorted_cut(size_t prefix, double target) const;
  size_t apply_typical(size_t count, bool& sorted, double& total, float max, float inv_temperature);
  size_t apply_top_p(size_t count, bool& sorted, double total);
  // Moves the candidates of the heaviest weight octaves whose mass reaches `target` to the front of
  // candidates_[0, count) (a prefix in rank order, in no order of its own); returns how many.
  size_t move_heaviest_octaves_first(size_t count, double target);
  size_t apply_min_p(size_t count, bool sorted);
  int32_t draw(size_t count);
  // Steps 4-8 over candidates_[0, count) (`sorted`: in rank order); nullopt when every one is masked.
  std::optional<int32_t> draw_from_candidates(size_t count, bool sorted);

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // scratch: the top-k heap, or one per vocabulary entry without top-k
  std::vector<int32_t> window_;        // scratch: sorted copy of the penalty window
  std::vector<Override> overrides_;    // scratch: penalized tokens in ascending id order
};

struct TokenProb {
  int32_t token;
  float logprob;  // natural log of softmax(raw logits)
};

// The `n` most likely tokens of softmax(logits) (no temperature or other transform), most likely first,
// ties toward the lower id; fewer when the vocabulary is smaller. O(vocab * log n), no vocabulary-sized
// allocation.
std::vector<TokenProb> top_logprobs(std::span<const float> logits, size_t n);

// log softmax(logits)[token].
float token_logprob(std::span<const float> logits, int32_t token);

// log(sum(exp(logits))), computed stably in double; every logprob above is logit - log_sum_exp(logits).
double log_sum_exp(std::span<const float> logits);

}  // namespace kvtrie
