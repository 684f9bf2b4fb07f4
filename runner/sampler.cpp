#include "runner/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "base/error.h"

namespace kvtrie {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A NaN logit would break the strict ordering the selection algorithms rely on; it can never be chosen.
float sanitize(float logit) {
  return std::isnan(logit) ? kNegInf : logit;
}

// Strict total order "a ranks before b": higher logit first, the lower id on ties. Because it is total,
// nth_element/sort give the same result with any standard library.
template <typename T>
bool ranks_before(float logit_a, T id_a, float logit_b, T id_b) {
  return logit_a != logit_b ? logit_a > logit_b : id_a < id_b;
}

// The same order over candidates (Sampler::Candidate: a logit and an id), for the sorts and heaps below.
constexpr auto by_rank = [](const auto& a, const auto& b) {
  return ranks_before(a.logit, a.id, b.logit, b.id);
};

// Logits a block of the scans below: a block whose largest logit cannot matter is passed over whole.
constexpr size_t kBlock = 64;

// Candidates above which top_p finds its cut through weight octaves (sampling without top_k).
constexpr size_t kWholeVocabulary = 1024;

// The larger of a logit and a running maximum, a NaN logit read as -inf: the form that compiles to a vector
// max instruction (whose NaN rule it matches).
float max_keeping(float running, float v) {
  return v > running ? v : running;
}

// The largest of n raw logits, NaN read as -inf. Eight running maxima, so the loop runs on vector registers:
// the engine scans a row of 128k logits after every step while the GPU waits for the next token.
float max_of(const float* p, size_t n) {
  float m[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) m[j] = max_keeping(m[j], p[i + j]);
  float best = kNegInf;
  for (; i < n; ++i) best = max_keeping(best, p[i]);
  for (float v : m) best = max_keeping(best, v);
  return best;
}

// The first of n raw logits that reads as `value` (NaN as -inf), or n: whole blocks by their maximum first.
size_t first_holding(const float* p, size_t n, float value) {
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    if (max_of(p + b, e - b) != value) continue;
    for (size_t i = b; i < e; ++i)
      if (sanitize(p[i]) == value) return i;
  }
  return n;
}

}  // namespace

std::optional<std::string> validate(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) return "temperature must be a number >= 0";
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) return "top_p must be in [0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!(p.typical_p >= 0.0f && p.typical_p <= 1.0f)) return "typical_p must be in [0, 1]";
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

template <typename Run, typename Penalized>
void Sampler::for_each_run(std::span<const float> logits, Run&& run, Penalized&& penalized) const {
  // The penalized tokens are few: walk the raw logits in runs between them instead of copying the row.
  size_t i = 0;
  for (const Override& o : overrides_) {
    const auto token = static_cast<size_t>(o.token);
    if (i < token) run(i, token);
    penalized(token, o.logit);
    i = token + 1;
  }
  if (i < logits.size()) run(i, logits.size());
}

template <typename Fn>
void Sampler::for_each_logit(std::span<const float> logits, Fn&& fn) const {
  for_each_run(
      logits,
      [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) fn(i, sanitize(logits[i]));
      },
      fn);
}

bool Sampler::penalizes() const {
  return params_.repeat_last_n != 0 && (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                                        params_.frequency_penalty != 0.0f);
}

bool Sampler::picks_the_largest_logit() const {
  return params_.temperature <= 0.0f && !penalizes();
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent_tokens) {
  KVTRIE_CHECK(!logits.empty(), "sample() needs at least one logit");
  KVTRIE_CHECK(logits.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
               "vocabulary too large");
  collect_penalties(logits, recent_tokens);
  if (params_.temperature <= 0.0f) return greedy(logits);

  size_t count;
  bool sorted;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size()) {
    count = select_top_k(logits, static_cast<size_t>(params_.top_k));
    sorted = true;
  } else {
    // resize() keeps the capacity, so only the first call (or a larger vocabulary) allocates.
    candidates_.resize(logits.size());
    for_each_logit(logits, [this](size_t i, float v) {
      candidates_[i] = {static_cast<int32_t>(i), v, 0.0f, 0.0f};
    });
    count = logits.size();
    sorted = false;
  }
  const std::optional<int32_t> token = draw_from_candidates(count, sorted);
  return token ? *token : greedy(logits);  // every candidate is masked: no distribution to draw from
}

size_t Sampler::top_entries_needed(size_t vocabulary, size_t history) const {
  if (params_.temperature <= 0.0f || params_.top_k <= 0 || static_cast<size_t>(params_.top_k) >= vocabulary)
    return 0;
  const auto k = static_cast<size_t>(params_.top_k);
  if (!penalizes()) return k;
  if (params_.repeat_penalty < 1.0f || params_.presence_penalty < 0.0f || params_.frequency_penalty < 0.0f)
    return 0;  // a penalty that can raise a logit from anywhere in the row
  return k + window_length(history);
}

int32_t Sampler::sample_top(std::span<const int32_t> ids, std::span<const float> logits,
                            std::span<const int32_t> recent_tokens) {
  const size_t needed = top_entries_needed(SIZE_MAX, recent_tokens.size());
  KVTRIE_CHECK(ids.size() == logits.size() && needed != 0 && ids.size() >= needed,
               "sample_top() needs top-k sampling, no penalty that can raise a logit, and the row's best "
               "top_entries_needed() entries");
  const auto k = static_cast<size_t>(params_.top_k);
  // What select_top_k() keeps of the whole row, in its order. Without penalties the given entries are in
  // that order; with them, the penalized logits of the window's tokens among them re-rank them.
  candidates_.clear();
  if (!penalizes() || recent_tokens.empty()) {
    for (size_t i = 0; i < k; ++i) candidates_.push_back({ids[i], sanitize(logits[i]), 0.0f, 0.0f});
  } else {
    load_window(recent_tokens);
    for (size_t i = 0; i < ids.size(); ++i) {
      float logit = sanitize(logits[i]);
      const auto [first, last] = std::equal_range(window_.begin(), window_.end(), ids[i]);
      if (first != last) logit = penalized(logit, static_cast<size_t>(last - first));
      candidates_.push_back({ids[i], logit, 0.0f, 0.0f});
    }
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k),
                      candidates_.end(), by_rank);
    candidates_.resize(k);
  }
  const std::optional<int32_t> token = draw_from_candidates(k, true);
  return token ? *token : candidates_[0].id;  // all masked: the lowest id, as greedy() over the row
}

std::optional<int32_t> Sampler::draw_from_candidates(size_t count, bool sorted) {
  float max = kNegInf;
  for (size_t i = 0; i < count; ++i) max = std::max(max, candidates_[i].logit);
  if (max == kNegInf) return std::nullopt;
  const float inv_temperature = 1.0f / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) {
    Candidate& c = candidates_[i];
    c.weight = std::exp((c.logit - max) * inv_temperature);
    total += c.weight;
  }
  count = apply_typical(count, sorted, total, max, inv_temperature);
  count = apply_top_p(count, sorted, total);
  count = apply_min_p(count, sorted);
  return draw(count);
}

size_t Sampler::window_length(size_t history) const {
  return params_.repeat_last_n < 0 ? history : std::min(history, static_cast<size_t>(params_.repeat_last_n));
}

void Sampler::load_window(std::span<const int32_t> recent_tokens) {
  const size_t window = window_length(recent_tokens.size());
  // Scratch vectors keep their capacity, so this allocates only while the window keeps growing.
  window_.assign(recent_tokens.end() - static_cast<std::ptrdiff_t>(window), recent_tokens.end());
  std::sort(window_.begin(), window_.end());
}

float Sampler::penalized(float logit, size_t occurrences) const {
  if (params_.repeat_penalty != 1.0f)
    logit = logit > 0.0f ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
  return logit - (static_cast<float>(occurrences) * params_.frequency_penalty + params_.presence_penalty);
}

void Sampler::collect_penalties(std::span<const float> logits, std::span<const int32_t> recent_tokens) {
  overrides_.clear();
  if (!penalizes() || recent_tokens.empty()) return;
  load_window(recent_tokens);
  for (size_t i = 0; i < window_.size();) {
    const int32_t token = window_[i];
    size_t run = i;
    while (run < window_.size() && window_[run] == token) ++run;
    const size_t occurrences = run - i;
    i = run;
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    // ascending token order, as for_each_logit needs
    overrides_.push_back({token, penalized(sanitize(logits[static_cast<size_t>(token)]), occurrences)});
  }
}

int32_t Sampler::greedy(std::span<const float> logits) const {
  // The best logit (vectorized over the raw runs), then the lowest id that holds it. With every logit -inf
  // or NaN that is id 0, as a scan keeping the first strictly better logit gives.
  float best = kNegInf;
  for_each_run(
      logits,
      [&](size_t begin, size_t end) { best = max_keeping(best, max_of(logits.data() + begin, end - begin)); },
      [&](size_t, float v) { best = max_keeping(best, v); });
  size_t begin = 0;
  for (const Override& o : overrides_) {
    const auto token = static_cast<size_t>(o.token);
    if (const size_t at = first_holding(logits.data() + begin, token - begin, best); at < token - begin)
      return static_cast<int32_t>(begin + at);
    if (o.logit == best) return o.token;
    begin = token + 1;
  }
  const size_t at = first_holding(logits.data() + begin, logits.size() - begin, best);
  return at < logits.size() - begin ? static_cast<int32_t>(begin + at) : 0;
}

size_t Sampler::select_top_k(std::span<const float> logits, size_t k) {
  // A k-entry heap whose front is the worst kept candidate: for almost all of the vocabulary the only work is
  // one comparison with that front, so the loop stays tight and the cost is O(vocab + k log k) with no
  // vocabulary-sized buffer.
  candidates_.clear();
  float threshold = kNegInf;
  bool filling = true;
  const auto offer = [&](size_t i, float v) {
    // Ids only grow, so a logit equal to the front's ranks after it and is rightly skipped.
    if (filling || v > threshold) [[unlikely]] {
      threshold = offer_top_k(static_cast<int32_t>(i), v, k);
      filling = candidates_.size() < k;
    }
  };
  // Once the heap is full, a block none of whose logits beats its front offers nothing: one vectorized max
  // instead of a comparison a logit.
  const auto run = [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; b += kBlock) {
      const size_t e = std::min(end, b + kBlock);
      if (!filling && max_of(logits.data() + b, e - b) <= threshold) continue;
      for (size_t i = b; i < e; ++i) offer(i, sanitize(logits[i]));
    }
  };
  for_each_run(logits, run, offer);
  std::sort(candidates_.begin(), candidates_.end(), by_rank);
  return candidates_.size();
}

float Sampler::offer_top_k(int32_t id, float logit, size_t k) {
  if (candidates_.size() < k) {
    candidates_.push_back({id, logit, 0.0f, 0.0f});
    std::push_heap(candidates_.begin(), candidates_.end(), by_rank);
  } else {
    std::pop_heap(candidates_.begin(), candidates_.end(), by_rank);
    candidates_.back() = {id, logit, 0.0f, 0.0f};
    std::push_heap(candidates_.begin(), candidates_.end(), by_rank);
  }
  return candidates_.front().logit;
}

size_t Sampler::sorted_cut(size_t prefix, double target) const {
  double cumulative = 0.0;
  for (size_t i = 0; i < prefix; ++i) {
    cumulative += candidates_[i].weight;
    if (cumulative >= target) return i + 1;
  }
  return 0;
}

template <typename Before>
size_t Sampler::prefix_reaching(size_t count, double target, Before before, bool presorted) {
  auto at = [this](size_t i) { return candidates_.begin() + static_cast<std::ptrdiff_t>(i); };
  // Sorting the whole vocabulary is wasteful when a few tokens hold the mass: select a growing top prefix
  // (O(vocab) per step) until it holds the target mass, then sort only that prefix to find the cut.
  size_t selected = 0;  // candidates_[0, selected) are the `selected` first, in some order
  size_t prefix = presorted ? count : std::min<size_t>(count, 64);
  double mass = 0.0;
  for (;;) {
    if (!presorted && prefix < count) std::nth_element(at(selected), at(prefix), at(count), before);
    for (size_t i = selected; i < prefix; ++i) mass += candidates_[i].weight;
    selected = prefix;
    if (mass >= target || prefix == count) {
      if (!presorted) std::sort(at(0), at(prefix), before);
      // The cut is found in sorted order, so it does not depend on the summation order above.
      if (const size_t cut = sorted_cut(prefix, target)) return cut;
      if (prefix == count) return count;  // rounding kept the sum just under the target: keep everything
    }
    prefix = std::min(count, prefix * 4);
  }
}

size_t Sampler::apply_typical(size_t count, bool& sorted, double& total, float max, float inv_temperature) {
  if (params_.typical_p >= 1.0f) return count;
  // With s = (logit - max) / T, -log p = log(total) - s and the entropy H = log(total) - E[s], so the
  // distance |-log p - H| is |E[s] - s|: no logarithm per token. Tokens of weight 0 (underflow, masked)
  // carry no probability and are the least typical.
  double mean = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const Candidate& c = candidates_[i];
    if (c.weight > 0.0f) mean += c.weight / total * static_cast<double>((c.logit - max) * inv_temperature);
  }
  for (size_t i = 0; i < count; ++i) {
    Candidate& c = candidates_[i];
    c.score =
        c.weight > 0.0f
            ? static_cast<float>(std::abs(mean - static_cast<double>((c.logit - max) * inv_temperature)))
            : std::numeric_limits<float>::infinity();
  }
  auto more_typical = [](const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score < b.score : ranks_before(a.logit, a.id, b.logit, b.id);
  };
  const size_t kept =
      prefix_reaching(count, static_cast<double>(params_.typical_p) * total, more_typical, false);
  // Back to rank order for top_p and min_p, and renormalize over what is kept.
  std::sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(kept), by_rank);
  sorted = true;
  total = 0.0;
  for (size_t i = 0; i < kept; ++i) total += candidates_[i].weight;
  return kept;
}

size_t Sampler::apply_top_p(size_t count, bool& sorted, double total) {
  if (params_.top_p >= 1.0f) return count;
  const double target = static_cast<double>(params_.top_p) * total;
  if (!sorted && count > kWholeVocabulary) {
    // The heaviest octaves reaching the target, sorted, hold the cut: the same sorted prefix and sums as
    // prefix_reaching's, found with one pass and one partition instead of a selection a growing prefix.
    const size_t front = move_heaviest_octaves_first(count, target);
    std::sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(front), by_rank);
    if (const size_t cut = sorted_cut(front, target)) {
      sorted = true;
      return cut;
    }
    // The octaves' sums and the sorted sum differ in their last bits: the general search below.
  }
  const size_t kept = prefix_reaching(count, target, by_rank, sorted);
  sorted = true;
  return kept;
}

size_t Sampler::move_heaviest_octaves_first(size_t count, double target) {
  // Weights are in (0, 1] (the best is exp(0)) or 0: octave o holds [2^-(o+1), 2^-o), 127 also what is
  // smaller. A weight never grows down the ranks, so every set of the first octaves is a prefix in rank
  // order.
  const auto octave = [](float w) {
    const uint32_t exponent = (std::bit_cast<uint32_t>(w) >> 23) & 0xFFu;
    return 127u - std::min(127u, exponent);
  };
  std::array<double, 128> mass{};
  for (size_t i = 0; i < count; ++i) mass[octave(candidates_[i].weight)] += candidates_[i].weight;
  uint32_t last = 0;
  for (double cumulative = mass[0]; cumulative < target && last < 127; cumulative += mass[++last]) {
  }
  const auto end =
      std::partition(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(count),
                     [&](const Candidate& c) { return octave(c.weight) <= last; });
  return static_cast<size_t>(end - candidates_.begin());
}

size_t Sampler::apply_min_p(size_t count, bool sorted) {
  if (params_.min_p <= 0.0f) return count;
  // Relative to the most likely kept candidate: weight 1 unless typical_p dropped it.
  float best = 0.0f;
  for (size_t i = 0; i < (sorted ? std::min<size_t>(count, 1) : count); ++i)
    best = std::max(best, candidates_[i].weight);
  const float threshold = params_.min_p * best;
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
  // float exp (a few ns) accumulated in double: each term is accurate to 1 ulp, far below what logprobs need.
  const auto max_f = static_cast<float>(max);
  for (float v : logits) sum += std::exp(sanitize(v) - max_f);
  return max + std::log(sum);
}

float token_logprob(std::span<const float> logits, int32_t token) {
  KVTRIE_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token outside the logits");
  return static_cast<float>(static_cast<double>(sanitize(logits[static_cast<size_t>(token)])) -
                            log_sum_exp(logits));
}

std::vector<TokenProb> top_logprobs(std::span<const float> logits, size_t n) {
  n = std::min(n, logits.size());
  std::vector<TokenProb> best;  // holds raw logits until the end; a heap whose front is the worst kept
  if (n == 0) return best;
  best.reserve(n);
  auto before = [](const TokenProb& a, const TokenProb& b) {
    return ranks_before(a.logprob, a.token, b.logprob, b.token);
  };
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
  for (TokenProb& entry : best)
    entry.logprob = static_cast<float>(static_cast<double>(entry.logprob) - log_z);
  return best;
}

}  // namespace kvtrie
