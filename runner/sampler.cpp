#include "runner/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/error.h"

namespace kvtrie {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A NaN logit would break the strict ordering the selection algorithms rely on; it can never be chosen.
float sanitize(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Strict total order "a ranks before b": higher logit first, the lower id on ties. Because it is total,
// nth_element/sort give the same result with any standard library.
template <typename T>
bool ranks_before(float logit_a, T id_a, float logit_b, T id_b) {
  return logit_a != logit_b ? logit_a > logit_b : id_a < id_b;
}

}  // namespace

std::optional<std::string> validate(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) return "temperature must be a number >= 0";
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) return "top_p must be in [0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0.0f) return "repeat_penalty must be > 0";
  if (p.repeat_last_n < -1) return "repeat_last_n must be >= -1";
  if (!std::isfinite(p.presence_penalty)) return "presence_penalty must be a finite number";
  if (!std::isfinite(p.frequency_penalty)) return "frequency_penalty must be a finite number";
  return std::nullopt;
}

namespace {

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

Sampler::Sampler(const SamplingParams& params)
    : params_(params), seed_(params.seed.value_or(random_seed())), rng_(seed_) {
  if (auto problem = validate(params)) throw Error("invalid sampling parameters: " + *problem);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent_tokens) {
  KVTRIE_CHECK(!logits.empty(), "sample() needs at least one logit");
  KVTRIE_CHECK(logits.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "vocabulary too large");
  load_and_penalize(logits, recent_tokens);
  if (params_.temperature <= 0.0f) return greedy();

  size_t count = apply_top_k(candidates_.size());
  bool sorted = count < candidates_.size();
  float max = kNegInf;
  for (size_t i = 0; i < count; ++i) max = std::max(max, candidates_[i].logit);
  if (max == kNegInf) return greedy();  // every candidate is masked: no distribution to draw from

  const float inv_temperature = 1.0f / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) {
    Candidate& c = candidates_[i];
    c.weight = std::exp((c.logit - max) * inv_temperature);
    total += c.weight;
  }
  count = apply_top_p(count, sorted, total);
  count = apply_min_p(count, sorted);
  return draw(count);
}

void Sampler::load_and_penalize(std::span<const float> logits, std::span<const int32_t> recent_tokens) {
  // resize() keeps the capacity, so only the first call (or a larger vocabulary) allocates.
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), sanitize(logits[i]), 0.0f};

  const bool any_penalty = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                           params_.frequency_penalty != 0.0f;
  if (!any_penalty || params_.repeat_last_n == 0 || recent_tokens.empty()) return;
  const size_t window = params_.repeat_last_n < 0
                            ? recent_tokens.size()
                            : std::min(recent_tokens.size(), static_cast<size_t>(params_.repeat_last_n));
  window_.assign(recent_tokens.end() - static_cast<std::ptrdiff_t>(window), recent_tokens.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    const int32_t token = window_[i];
    size_t run = i;
    while (run < window_.size() && window_[run] == token) ++run;
    const auto occurrences = static_cast<float>(run - i);
    i = run;
    if (token < 0 || static_cast<size_t>(token) >= candidates_.size()) continue;
    float& logit = candidates_[static_cast<size_t>(token)].logit;
    if (params_.repeat_penalty != 1.0f) logit = logit > 0.0f ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
    logit -= occurrences * params_.frequency_penalty + params_.presence_penalty;
  }
}

int32_t Sampler::greedy() const {
  // candidates_ may be permuted by an earlier step; the total order makes the winner unique anyway.
  const Candidate* best = &candidates_[0];
  for (const Candidate& c : candidates_)
    if (ranks_before(c.logit, c.id, best->logit, best->id)) best = &c;
  return best->id;
}

size_t Sampler::apply_top_k(size_t count) {
  if (params_.top_k <= 0 || static_cast<size_t>(params_.top_k) >= count) return count;
  const auto k = static_cast<std::ptrdiff_t>(params_.top_k);
  auto before = [](const Candidate& a, const Candidate& b) { return ranks_before(a.logit, a.id, b.logit, b.id); };
  // O(vocab) selection, then an O(k log k) sort of the survivors (top-p needs them most likely first).
  std::nth_element(candidates_.begin(), candidates_.begin() + k - 1, candidates_.end(), before);
  std::sort(candidates_.begin(), candidates_.begin() + k, before);
  return static_cast<size_t>(k);
}

size_t Sampler::apply_top_p(size_t count, bool& sorted, double total) {
  if (params_.top_p >= 1.0f) return count;
  const double target = static_cast<double>(params_.top_p) * total;
  auto before = [](const Candidate& a, const Candidate& b) { return ranks_before(a.logit, a.id, b.logit, b.id); };
  // Without top-k the candidates are unsorted. Sorting the whole vocabulary is wasteful when a few tokens
  // hold the mass, so sort a growing prefix until it reaches the target.
  size_t prefix = sorted ? count : std::min<size_t>(count, 64);
  for (;;) {
    if (!sorted) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(prefix),
                        candidates_.begin() + static_cast<std::ptrdiff_t>(count), before);
    }
    double cumulative = 0.0;
    for (size_t i = 0; i < prefix; ++i) {
      cumulative += candidates_[i].weight;
      if (cumulative >= target) {
        sorted = true;
        return i + 1;
      }
    }
    if (prefix == count) {
      sorted = true;
      return count;  // rounding kept the sum just under the target: keep everything
    }
    prefix = std::min(count, prefix * 4);
  }
}

size_t Sampler::apply_min_p(size_t count, bool sorted) {
  if (params_.min_p <= 0.0f) return count;
  // Weights are relative to the most likely candidate (weight 1), which every earlier step keeps.
  const float threshold = params_.min_p;
  if (sorted) {
    size_t keep = 1;
    while (keep < count && candidates_[keep].weight >= threshold) ++keep;
    return keep;
  }
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i)
    if (candidates_[i].weight >= threshold) candidates_[kept++] = candidates_[i];
  return std::max<size_t>(kept, 1);
}

int32_t Sampler::draw(size_t count) {
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) total += candidates_[i].weight;
  // 53 random bits -> a double uniform in [0, 1): the same on every platform, unlike the distributions of
  // <random>, whose algorithms are implementation-defined.
  const double uniform = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = uniform * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < count; ++i) {
    cumulative += candidates_[i].weight;
    if (target < cumulative) return candidates_[i].id;
  }
  return candidates_[count - 1].id;  // target landed on the rounding slack at the very end
}

double log_sum_exp(std::span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float v : logits) max = std::max(max, static_cast<double>(sanitize(v)));
  if (max == -std::numeric_limits<double>::infinity()) return max;
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(sanitize(v)) - max);
  return max + std::log(sum);
}

float token_logprob(std::span<const float> logits, int32_t token) {
  KVTRIE_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token outside the logits");
  return static_cast<float>(static_cast<double>(sanitize(logits[static_cast<size_t>(token)])) - log_sum_exp(logits));
}

std::vector<TokenProb> top_logprobs(std::span<const float> logits, size_t n) {
  n = std::min(n, logits.size());
  std::vector<TokenProb> best;  // holds raw logits until the end; a heap whose front is the worst kept
  if (n == 0) return best;
  best.reserve(n);
  auto before = [](const TokenProb& a, const TokenProb& b) { return ranks_before(a.logprob, a.token, b.logprob, b.token); };
  for (size_t i = 0; i < logits.size(); ++i) {
    const TokenProb entry{static_cast<int32_t>(i), sanitize(logits[i])};
    if (best.size() < n) {
      best.push_back(entry);
      std::push_heap(best.begin(), best.end(), before);
    } else if (before(entry, best.front())) {
      std::pop_heap(best.begin(), best.end(), before);
      best.back() = entry;
      std::push_heap(best.begin(), best.end(), before);
    }
  }
  std::sort(best.begin(), best.end(), before);
  const double log_z = log_sum_exp(logits);
  for (TokenProb& entry : best) entry.logprob = static_cast<float>(static_cast<double>(entry.logprob) - log_z);
  return best;
}

}  // namespace kvtrie
