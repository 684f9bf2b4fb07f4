// Sampler: each transform on small hand-made logits, determinism by seed, the empirical distribution against
// softmax(logits / T), and top_logprobs against a direct log-softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "base/error.h"
#include "runner/sampler.h"

namespace kvtrie {
namespace {

// Parameters with every transform switched off; tests switch on the one they check.
SamplingParams plain(float temperature, uint64_t seed = 1234) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = seed;
  return p;
}

// Logits whose softmax (T = 1) is exactly `probs` up to a constant.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::map<int32_t, int> histogram(Sampler& s, const std::vector<float>& logits, int draws,
                                 const std::vector<int32_t>& recent = {}) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[s.sample(logits, recent)];
  return counts;
}

std::set<int32_t> keys(const std::map<int32_t, int>& m) {
  std::set<int32_t> out;
  for (const auto& [k, v] : m) out.insert(k);
  return out;
}

TEST(Sampler, GreedyPicksArgmax) {
  Sampler s(plain(0.0f));
  const std::vector<float> logits{0.1f, 3.0f, -2.0f, 2.9f, 1.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(logits, {}), 1);
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 5.0f, 2.0f, 5.0f, 5.0f}, {}), 1);
  // Default top-k/top-p/min-p settings do not change greedy's choice.
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler d(p);
  EXPECT_EQ(d.sample(std::vector<float>{-1.0f, 7.0f, 7.0f}, {}), 1);
}

// The penalized row as the transform order defines it (NaN read as -inf first), for the scans below.
std::vector<float> penalized_row(std::vector<float> logits, const std::vector<int32_t>& window,
                                 const SamplingParams& p) {
  std::map<int32_t, int> counts;
  for (int32_t t : window) ++counts[t];
  for (float& v : logits)
    if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
  for (const auto& [t, n] : counts) {
    float& v = logits[static_cast<size_t>(t)];
    v = v > 0.0f ? v / p.repeat_penalty : v * p.repeat_penalty;
    v -= static_cast<float>(n) * p.frequency_penalty + p.presence_penalty;
  }
  return logits;
}

// Greedy on a vocabulary of many 64-logit blocks (the vectorized max, then the first id holding it) against
// a plain scan: ties, NaN, -inf and +inf anywhere, penalized tokens among them.
TEST(Sampler, GreedyOnALargeVocabularyMatchesAPlainScan) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.1f;
  p.presence_penalty = 0.2f;
  p.repeat_last_n = 64;
  Sampler s(p);
  std::mt19937 rng(7);
  const float inf = std::numeric_limits<float>::infinity();
  for (int round = 0; round < 300; ++round) {
    std::vector<float> logits(10007);
    for (float& v : logits) v = static_cast<float>(rng() % 40) * 0.25f - 5.0f;  // many ties
    for (int i = 0; i < 20; ++i) logits[rng() % logits.size()] = std::nanf("");
    for (int i = 0; i < 20; ++i) logits[rng() % logits.size()] = -inf;
    if (round % 10 == 0) logits[rng() % logits.size()] = inf;
    std::vector<int32_t> recent(80);
    for (int32_t& t : recent) t = static_cast<int32_t>(rng() % 64);  // the first block's ids, repeated
    const std::vector<int32_t> window(recent.end() - 64, recent.end());
    const std::vector<float> row = penalized_row(logits, window, p);
    const auto expected = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    ASSERT_EQ(s.sample(logits, recent), expected) << "round " << round;
  }
  std::vector<float> masked(10007, -inf);
  for (size_t i = 0; i < masked.size(); i += 3) masked[i] = std::nanf("");
  EXPECT_EQ(s.sample(masked, {}), 0);
}

// top_k on a vocabulary of many blocks: the k drawn tokens are the k best wherever they sit (a block's
// first or last logit, next to NaN, just above the cut in a late block), the tie at the cut goes to the
// lower id even when the higher one sits in a block whose best only equals the cut, and a penalized token
// is ranked by its penalized logit.
TEST(Sampler, TopKOnALargeVocabularyKeepsTheKBestAcrossBlocks) {
  SamplingParams p = plain(1.0f, 99);
  p.top_k = 5;
  p.repeat_penalty = 100.0f;
  Sampler s(p);
  std::vector<float> logits(4096, -10.0f);
  for (size_t i = 5; i < logits.size(); i += 97) logits[i] = std::nanf("");
  logits[0] = 3.0f;     // the first block's first logit
  logits[127] = 2.9f;   // the second block's last
  logits[128] = 2.8f;   // the third's first
  logits[1999] = 2.7f;  // the 5th place, tied with 2000, 3000 and 3001: the lowest id takes it
  logits[2000] = 2.7f;
  logits[3000] = 2.7f;
  logits[3001] = 2.7f;
  logits[3500] = 2.75f;  // the 4th, found when the cut is already 2.7
  logits[4095] = 3.5f;   // the best of all, but penalized: 3.5 / 100
  const std::map<int32_t, int> drawn = histogram(s, logits, 3000, {4095});
  EXPECT_EQ(keys(drawn), (std::set<int32_t>{0, 127, 128, 1999, 3500}));
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  Sampler s(plain(1.0f));
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits{-inf, 0.0f, -inf, 0.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(keys(histogram(s, logits, 2000)), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, MaskedTokensInsideTopKAreNeverDrawn) {
  // top_k larger than the number of unmasked tokens: the masked ones fill the heap with zero weight.
  SamplingParams p = plain(1.0f);
  p.top_k = 4;
  p.min_p = 0.0f;
  Sampler s(p);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits{-inf, 0.0f, -inf, -inf, -inf, 0.5f, -inf};
  EXPECT_EQ(keys(histogram(s, logits, 2000)), (std::set<int32_t>{1, 5}));
}

TEST(Sampler, AllMaskedFallsBackToLowestId) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits{-inf, -inf, -inf};
  for (int32_t top_k : {0, 2}) {
    SamplingParams p = plain(1.0f);
    p.top_k = top_k;
    Sampler s(p);
    EXPECT_EQ(s.sample(logits, {}), 0) << "top_k " << top_k;
  }
}

TEST(Sampler, TopKOnlyReturnsTheKBest) {
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  Sampler s(p);
  // Flat-ish logits: without top-k every token would appear in 4000 draws.
  const std::vector<float> logits{0.5f, 0.9f, 0.1f, 1.0f, 0.8f, 0.7f};
  EXPECT_EQ(keys(histogram(s, logits, 4000)), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, TopKTieAtTheCutKeepsLowerId) {
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  Sampler s(p);
  const std::vector<float> logits{1.0f, 2.0f, 1.0f, 1.0f};
  EXPECT_EQ(keys(histogram(s, logits, 3000)), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, TopPExcludesTheTail) {
  // probabilities 0.5, 0.3, 0.15, 0.05 (shuffled ids): top_p 0.75 keeps 0.5 and 0.3 (0.5 < 0.75 <= 0.8).
  const auto logits = logits_of({0.15, 0.5, 0.05, 0.3});
  for (int32_t top_k : {0, 4, 3}) {  // unsorted path (top-k off) and sorted path (after top-k)
    SamplingParams p = plain(1.0f);
    p.top_p = 0.75f;
    p.top_k = top_k;
    Sampler s(p);
    EXPECT_EQ(keys(histogram(s, logits, 4000)), (std::set<int32_t>{1, 3})) << "top_k " << top_k;
  }
  SamplingParams p = plain(1.0f);
  p.top_p = 0.85f;  // now 0.15 is needed too
  Sampler s(p);
  EXPECT_EQ(keys(histogram(s, logits, 4000)), (std::set<int32_t>{0, 1, 3}));
  p.top_p = 0.0f;  // keeps only the most likely token
  Sampler only(p);
  EXPECT_EQ(keys(histogram(only, logits, 500)), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPOnLargeVocabularyWithoutTopK) {
  // 5000 tokens: 100 "heavy" ones share ~90% of the mass, so the growing-prefix sort must go past 64.
  std::vector<float> logits(5000, 0.0f);
  for (int i = 0; i < 100; ++i) logits[static_cast<size_t>(i * 37 % 5000)] = 6.0f;  // e^6*100 vs 4900
  const double heavy = 100 * std::exp(6.0), mass = heavy + 4900;
  ASSERT_GT(heavy / mass, 0.8);
  SamplingParams p = plain(1.0f);
  p.top_p = 0.8f;
  Sampler s(p);
  const auto counts = histogram(s, logits, 3000);
  for (const auto& [token, n] : counts) EXPECT_EQ(logits[static_cast<size_t>(token)], 6.0f) << token;
  EXPECT_GT(counts.size(), 50u);  // the kept set is all (or nearly all) of the 100 heavy tokens
}

TEST(Sampler, MinPDropsTokensBelowFractionOfTheBest) {
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  for (int32_t top_k : {0, 4}) {
    SamplingParams p = plain(1.0f);
    p.top_k = top_k;
    p.min_p = 0.2f;  // threshold 0.1: 0.05 goes
    Sampler s(p);
    EXPECT_EQ(keys(histogram(s, logits, 4000)), (std::set<int32_t>{0, 1, 2})) << "top_k " << top_k;
    p.min_p = 0.5f;  // threshold 0.25: 0.15 goes too
    Sampler t(p);
    EXPECT_EQ(keys(histogram(t, logits, 4000)), (std::set<int32_t>{0, 1})) << "top_k " << top_k;
  }
}

TEST(Sampler, MinPActsAfterTemperature) {
  // At T = 1 the ratio of the two tokens is e^-1 = 0.37 >= 0.3: both stay. At T = 0.5 it is e^-2 = 0.135.
  const std::vector<float> logits{1.0f, 0.0f};
  SamplingParams p = plain(1.0f);
  p.min_p = 0.3f;
  Sampler warm(p);
  EXPECT_EQ(keys(histogram(warm, logits, 2000)), (std::set<int32_t>{0, 1}));
  p.temperature = 0.5f;
  Sampler cool(p);
  EXPECT_EQ(keys(histogram(cool, logits, 2000)), (std::set<int32_t>{0}));
}

// Reference chain for typical_p and top_p, written out independently: candidates in rank order (higher
// logit, then lower id) with their probabilities renormalized over the candidates.
struct RefToken {
  int32_t id;
  double logit;
  double p;
};

std::vector<RefToken> ref_softmax(const std::vector<float>& logits) {
  std::vector<RefToken> out;
  for (size_t i = 0; i < logits.size(); ++i) out.push_back({static_cast<int32_t>(i), logits[i], 0.0});
  std::sort(out.begin(), out.end(), [](const RefToken& a, const RefToken& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  });
  double z = 0;
  for (const RefToken& t : out) z += std::exp(t.logit);
  for (RefToken& t : out) t.p = std::exp(t.logit) / z;
  return out;
}

void renormalize(std::vector<RefToken>& tokens) {
  double z = 0;
  for (const RefToken& t : tokens) z += t.p;
  for (RefToken& t : tokens) t.p /= z;
}

// Locally typical sampling: closest surprise to the entropy first, until the kept mass reaches typical_p.
std::vector<RefToken> ref_typical(std::vector<RefToken> tokens, double typical_p) {
  renormalize(tokens);
  double entropy = 0;
  for (const RefToken& t : tokens) entropy -= t.p * std::log(t.p);
  std::vector<std::pair<double, size_t>> order;  // (distance, rank)
  for (size_t i = 0; i < tokens.size(); ++i) order.push_back({std::abs(-std::log(tokens[i].p) - entropy), i});
  std::sort(order.begin(), order.end());
  std::vector<size_t> kept;
  double mass = 0;
  for (const auto& [distance, rank] : order) {
    kept.push_back(rank);
    mass += tokens[rank].p;
    if (mass >= typical_p) break;
  }
  std::sort(kept.begin(), kept.end());
  std::vector<RefToken> out;
  for (size_t rank : kept) out.push_back(tokens[rank]);
  renormalize(out);
  return out;
}

std::vector<RefToken> ref_top_p(std::vector<RefToken> tokens, double top_p) {
  renormalize(tokens);
  double mass = 0;
  size_t n = 0;
  while (n < tokens.size() && mass < top_p) mass += tokens[n++].p;
  tokens.resize(std::max<size_t>(n, 1));
  return tokens;
}

std::set<int32_t> ids_of(const std::vector<RefToken>& tokens) {
  std::set<int32_t> out;
  for (const RefToken& t : tokens) out.insert(t.id);
  return out;
}

// One likely token (p = 0.4, id 17) over a flat tail of 100 tokens of p = 0.006: the tail's surprise is
// closer to the entropy than the likely token's, so locally typical sampling drops the most likely token.
std::vector<float> likely_token_over_flat_tail() {
  std::vector<double> probs(101, 0.006);
  probs[17] = 0.4;
  return logits_of(probs);
}

// top_p over a whole vocabulary of 20,000 (no top_k: the cut found through weight octaves) keeps exactly the
// reference's most-likely-first prefix: 8 of the 10 heavy tokens at top_p 0.6.
TEST(Sampler, TopPOverAWholeVocabularyKeepsTheReferencePrefix) {
  std::vector<float> logits(20000, 0.0f);
  for (int i = 0; i < 10; ++i)
    logits[static_cast<size_t>(i * 1999 % 20000)] = 9.0f - 0.1f * static_cast<float>(i);
  SamplingParams p = plain(1.0f);
  p.top_p = 0.6f;
  Sampler s(p);
  const std::set<int32_t> expected = ids_of(ref_top_p(ref_softmax(logits), 0.6));
  ASSERT_EQ(expected.size(), 8u);
  EXPECT_EQ(keys(histogram(s, logits, 3000)), expected);
}

TEST(Sampler, TypicalPKeepsTheTokensClosestToTheEntropy) {
  const auto logits = likely_token_over_flat_tail();
  const std::set<int32_t> expected = ids_of(ref_typical(ref_softmax(logits), 0.5));
  ASSERT_FALSE(expected.contains(17))
      << "the reference must drop the most likely token for this test to bite";
  ASSERT_EQ(expected.size(), 84u);      // 84 x 0.006 = 0.504 reaches 0.5; ties keep the lower ids
  for (int32_t top_k : {0, 101, 90}) {  // the unsorted path, and the sorted one after top-k
    std::vector<RefToken> ranked = ref_softmax(logits);
    if (top_k > 0) ranked.resize(std::min<size_t>(ranked.size(), static_cast<size_t>(top_k)));
    const std::set<int32_t> want = ids_of(ref_typical(ranked, 0.5));
    EXPECT_FALSE(want.contains(17));
    SamplingParams p = plain(1.0f);
    p.typical_p = 0.5f;
    p.top_k = top_k;
    Sampler s(p);
    EXPECT_EQ(keys(histogram(s, logits, 6000)), want) << "top_k " << top_k;
  }
  SamplingParams off = plain(1.0f);
  off.typical_p = 1.0f;  // disabled: the likely token is drawn about 40% of the time
  Sampler s(off);
  EXPECT_GT(histogram(s, logits, 500)[17], 100);
}

TEST(Sampler, TypicalPZeroKeepsOnlyTheMostTypicalToken) {
  const auto logits = likely_token_over_flat_tail();
  SamplingParams p = plain(1.0f);
  p.typical_p = 0.0f;
  Sampler s(p);
  // Every tail token is equally typical; the tie goes to the lowest id.
  EXPECT_EQ(keys(histogram(s, logits, 300)), (std::set<int32_t>{0}));
}

TEST(Sampler, TypicalPRunsBeforeTopPAndMinPSeesTheKeptBest) {
  const auto logits = likely_token_over_flat_tail();
  // Documented order: typical_p, then top_p over the renormalized survivors.
  const std::set<int32_t> documented = ids_of(ref_top_p(ref_typical(ref_softmax(logits), 0.5), 0.5));
  const std::set<int32_t> swapped = ids_of(ref_typical(ref_top_p(ref_softmax(logits), 0.5), 0.5));
  ASSERT_NE(documented, swapped) << "the two orders must differ for this test to bite";
  SamplingParams p = plain(1.0f);
  p.typical_p = 0.5f;
  p.top_p = 0.5f;
  Sampler s(p);
  EXPECT_EQ(keys(histogram(s, logits, 6000)), documented);
  // min_p is relative to the best kept token (a tail token), not to the dropped likely one: with a threshold
  // relative to p = 0.4 (0.9 x 0.4 / 0.006 = 60x a tail token) nothing but one token would survive.
  p.top_p = 1.0f;
  p.min_p = 0.9f;
  Sampler m(p);
  EXPECT_EQ(keys(histogram(m, logits, 6000)).size(), 84u);
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.1f;
  Sampler s(p);
  const std::vector<float> pos{2.0f, 1.9f, 0.0f};
  EXPECT_EQ(s.sample(pos, {}), 0);
  EXPECT_EQ(s.sample(pos, std::vector<int32_t>{0}), 1);  // 2.0 / 1.1 = 1.82 < 1.9
  const std::vector<float> neg{-1.0f, -1.05f};
  EXPECT_EQ(s.sample(neg, {}), 0);
  EXPECT_EQ(s.sample(neg, std::vector<int32_t>{0}), 1);  // -1.0 * 1.1 = -1.1 < -1.05
  // Repeats within the window are penalized once, not per occurrence.
  const std::vector<float> close{2.0f, 1.5f};
  EXPECT_EQ(s.sample(close, std::vector<int32_t>{0, 0, 0, 0}), 0);  // 2.0 / 1.1, never 2.0 / 1.1^4
}

TEST(Sampler, PenaltyWindowIsTheLastRepeatLastNTokens) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  Sampler s(p);
  const std::vector<float> logits{2.0f, 1.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(s.sample(logits, std::vector<int32_t>{0, 5, 5, 5}), 0);  // token 0 is outside the window
  EXPECT_EQ(s.sample(logits, std::vector<int32_t>{5, 5, 0}), 1);     // inside: 2.0 / 2 = 1.0 < 1.5
  p.repeat_last_n = 0;
  Sampler off(p);
  EXPECT_EQ(off.sample(logits, std::vector<int32_t>{0}), 0);
  p.repeat_last_n = -1;
  Sampler all(p);
  std::vector<int32_t> long_history(500, 4);
  long_history[0] = 0;
  EXPECT_EQ(all.sample(logits, long_history), 1);
  // Out-of-vocabulary ids in the history are ignored, not an error.
  EXPECT_EQ(all.sample(logits, std::vector<int32_t>{-3, 99}), 0);
}

TEST(Sampler, FrequencyPenaltyScalesWithCountPresenceDoesNot) {
  SamplingParams p = plain(0.0f);
  p.frequency_penalty = 0.05f;
  Sampler freq(p);
  const std::vector<float> logits{2.0f, 1.9f};
  EXPECT_EQ(freq.sample(logits, std::vector<int32_t>{0}), 0);        // 2.0 - 0.05 = 1.95
  EXPECT_EQ(freq.sample(logits, std::vector<int32_t>{0, 0, 0}), 1);  // 2.0 - 0.15 = 1.85 < 1.9
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.15f;
  Sampler pres(p);
  EXPECT_EQ(pres.sample(logits, std::vector<int32_t>{0}), 1);           // 1.85 < 1.9
  EXPECT_EQ(pres.sample(logits, std::vector<int32_t>{0, 0, 0, 1}), 0);  // both lose 0.15 once
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> logits(50, 0.0f);  // uniform over 50 tokens
  auto run = [&](uint64_t seed) {
    Sampler s(plain(1.0f, seed));
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) out.push_back(s.sample(logits, out));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));  // equal by chance with probability 50^-100
  Sampler seeded(plain(1.0f, 77));
  EXPECT_EQ(seeded.seed(), 77u);
  SamplingParams unseeded = plain(1.0f);
  unseeded.seed.reset();
  EXPECT_NE(Sampler(unseeded).seed(), Sampler(unseeded).seed());  // two random 64-bit seeds
}

TEST(Sampler, ReportedRandomSeedReproducesTheSequence) {
  std::vector<float> logits(20, 0.0f);
  SamplingParams p = plain(1.0f);
  p.seed.reset();
  Sampler a(p);
  Sampler b(plain(1.0f, a.seed()));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits, {}), b.sample(logits, {}));
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmaxWithTemperature) {
  const std::vector<float> logits{1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f};
  const double temperature = 0.7;
  std::vector<double> expected(logits.size());
  double z = 0;
  for (size_t i = 0; i < logits.size(); ++i) z += expected[i] = std::exp(logits[i] / temperature);
  for (double& e : expected) e /= z;
  for (uint64_t seed : {1u, 2u, 3u}) {
    Sampler s(plain(static_cast<float>(temperature), seed));
    const int draws = 100000;
    const auto counts = histogram(s, logits, draws);
    // Pearson chi-square with 5 degrees of freedom: P(chi2 > 25) is about 1.4e-4 for a correct sampler.
    double chi2 = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const auto it = counts.find(static_cast<int32_t>(i));
      const double observed = it == counts.end() ? 0.0 : it->second;
      const double want = expected[i] * draws;
      chi2 += (observed - want) * (observed - want) / want;
    }
    EXPECT_LT(chi2, 25.0) << "seed " << seed;
  }
}

TEST(Sampler, LargeVocabularyDefaultsStayInTopK) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(50000);
  for (float& l : logits) l = normal(rng);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const float fortieth = sorted[39];
  SamplingParams defaults;
  defaults.seed = 9;
  Sampler s(defaults);
  for (int i = 0; i < 200; ++i) EXPECT_GE(logits[static_cast<size_t>(s.sample(logits, {}))], fortieth);
}

// The row's best `k` entries in rank order (the larger logit first, the lower id among equal ones, NaN as
// -inf), written independently of the Sampler: what GpuModel's top candidates hand to sample_top().
void best_entries(const std::vector<float>& row, size_t k, std::vector<int32_t>& ids,
                  std::vector<float>& best) {
  const auto value = [&](int32_t i) {
    const float v = row[static_cast<size_t>(i)];
    return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
  };
  std::vector<int32_t> order(row.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return value(a) != value(b) ? value(a) > value(b) : a < b; });
  ids.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  best.clear();
  for (int32_t id : ids) best.push_back(value(id));
}

// A row handed over as its 64 best entries draws what the whole row draws, draw after draw from one seed,
// in every setting that samples from the top (ties at the cut, NaN, -inf, a row with every logit masked).
TEST(Sampler, TheTopEntriesOfARowDrawTheTokensOfTheWholeRow) {
  constexpr size_t kEntries = 64, kVocab = 5000;
  std::mt19937 rng(21);
  std::vector<std::vector<float>> rows(40, std::vector<float>(kVocab));
  for (auto& row : rows)
    for (float& v : row) v = static_cast<float>(rng() % 200) * 0.05f;  // many ties
  for (int i = 0; i < 400; ++i) rows[rng() % rows.size()][rng() % kVocab] = std::nanf("");
  for (int i = 0; i < 400; ++i) rows[rng() % rows.size()][rng() % kVocab] = -INFINITY;
  std::fill(rows[7].begin(), rows[7].end(), -INFINITY);
  std::vector<SamplingParams> settings(5, SamplingParams{});
  settings[1].top_k = 1;
  settings[2].top_k = 64;
  settings[2].top_p = 1.0f;
  settings[2].min_p = 0.0f;
  settings[3].typical_p = 0.7f;
  settings[3].temperature = 1.5f;
  settings[4].top_k = 5;
  settings[4].temperature = 0.3f;
  std::vector<int32_t> ids;
  std::vector<float> best;
  for (size_t p = 0; p < settings.size(); ++p) {
    settings[p].seed = 100 + p;
    Sampler whole(settings[p]), top(settings[p]);
    ASSERT_EQ(top.top_entries_needed(kVocab, 0), static_cast<size_t>(settings[p].top_k)) << "setting " << p;
    for (int draw = 0; draw < 300; ++draw) {
      const std::vector<float>& row = rows[static_cast<size_t>(draw) % rows.size()];
      best_entries(row, kEntries, ids, best);
      ASSERT_EQ(top.sample_top(ids, best, {}), whole.sample(row, {})) << "setting " << p << ", draw " << draw;
    }
  }
}

// With penalties that only lower logits, a row handed over as its best top_k + window entries draws what
// the whole row draws, whatever the history: penalized tokens among the entries re-rank (some fall out of
// the top_k), and those below them cannot climb in. Histories repeat tokens (frequency penalties), hold the
// row's best tokens, and are longer than the window.
TEST(Sampler, TheTopEntriesOfAPenalizedRowDrawTheTokensOfTheWholeRow) {
  constexpr size_t kVocab = 3000;
  std::mt19937 rng(23);
  std::vector<std::vector<float>> rows(30, std::vector<float>(kVocab));
  for (auto& row : rows)
    for (float& v : row) v = static_cast<float>(static_cast<int>(rng() % 400) - 200) * 0.03f;  // ties, signs
  for (int i = 0; i < 200; ++i) rows[rng() % rows.size()][rng() % kVocab] = std::nanf("");
  std::vector<SamplingParams> settings(5, SamplingParams{});
  settings[0].repeat_penalty = 1.1f;  // Ollama's defaults: top_k 40, the last 64 tokens
  settings[1].repeat_penalty = 1.3f;
  settings[1].repeat_last_n = 16;
  settings[1].top_k = 8;
  settings[2].presence_penalty = 0.01f;  // small beside the logits' steps of 0.03: re-ranks within the top
  settings[2].frequency_penalty = 0.02f;
  settings[2].repeat_last_n = 32;
  settings[3].repeat_penalty = 2.0f;
  settings[3].repeat_last_n = -1;  // the whole history
  settings[3].top_k = 20;
  settings[4].repeat_penalty = 1.1f;
  settings[4].frequency_penalty = 0.5f;
  settings[4].top_k = 1;
  settings[4].temperature = 1.2f;
  std::vector<int32_t> ids, history;
  std::vector<float> best;
  for (size_t p = 0; p < settings.size(); ++p) {
    settings[p].seed = 300 + p;
    Sampler whole(settings[p]), top(settings[p]);
    for (int draw = 0; draw < 300; ++draw) {
      const std::vector<float>& row = rows[static_cast<size_t>(draw) % rows.size()];
      // A history of 0 to 79 tokens: half from the row's best 50 (so they are penalized in the top), half
      // anywhere, with repeats.
      history.clear();
      best_entries(row, 50, ids, best);
      for (size_t i = 0, n = static_cast<size_t>(draw) % 80; i < n; ++i)
        history.push_back(i % 2 == 0 ? ids[rng() % ids.size()] : static_cast<int32_t>(rng() % kVocab));
      const size_t needed = top.top_entries_needed(kVocab, history.size());
      ASSERT_NE(needed, 0u) << "setting " << p;
      best_entries(row, needed, ids, best);
      ASSERT_EQ(top.sample_top(ids, best, history), whole.sample(row, history))
          << "setting " << p << ", draw " << draw;
    }
  }
}

TEST(Sampler, TopKSamplingNeedsTopKEntriesPlusThePenaltyWindow) {
  SamplingParams p;  // temperature 0.8, top_k 40
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 500), 40u) << "no penalty: top_k";
  EXPECT_EQ(Sampler(p).top_entries_needed(40, 0), 0u) << "top_k covers the vocabulary: no top-k";
  p.top_k = 0;
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 0), 0u) << "top-k off";
  p = SamplingParams{};
  p.temperature = 0.0f;
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 0), 0u) << "greedy";
  p = SamplingParams{};
  p.repeat_penalty = 1.1f;  // over the last 64
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 10), 50u) << "a history shorter than the window";
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 500), 104u) << "the whole window";
  p.repeat_last_n = -1;
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 500), 540u) << "the whole history";
  p.repeat_last_n = 0;
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 500), 40u) << "an empty window: no penalty";
  for (const auto& raises : {std::pair{0.9f, 0.0f}, std::pair{1.0f, -0.5f}}) {
    p = SamplingParams{};
    p.repeat_penalty = raises.first;
    p.presence_penalty = raises.second;
    EXPECT_EQ(Sampler(p).top_entries_needed(128256, 10), 0u) << "a penalty that can raise a logit";
  }
  p = SamplingParams{};
  p.frequency_penalty = -0.1f;
  EXPECT_EQ(Sampler(p).top_entries_needed(128256, 10), 0u) << "a negative frequency penalty";
  p = SamplingParams{};
  p.repeat_penalty = 1.1f;
  Sampler penalized(p);
  const std::vector<int32_t> ids(64, 0), history(30, 1);
  const std::vector<float> best(64, 0.0f);
  EXPECT_NO_THROW(penalized.sample_top(ids, best, std::span(history).first(24)));
  EXPECT_THROW(penalized.sample_top(ids, best, history), Error) << "fewer entries than top_k + window";
  EXPECT_THROW(Sampler(SamplingParams{}).sample_top(std::span(ids).first(39), std::span(best).first(39), {}),
               Error)
      << "fewer entries than top_k";
  p.temperature = 0.0f;
  EXPECT_THROW(Sampler(p).sample_top(ids, best, {}), Error) << "greedy needs the row";
}

TEST(Sampler, InvalidParametersAreReportedAndRejected) {
  EXPECT_FALSE(validate(SamplingParams{}).has_value());
  SamplingParams p;
  p.top_p = 1.5f;
  ASSERT_TRUE(validate(p).has_value());
  EXPECT_NE(validate(p)->find("top_p"), std::string::npos);
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.temperature = -1.0f;
  EXPECT_TRUE(validate(p).has_value());
  p = SamplingParams{};
  p.repeat_penalty = 0.0f;
  EXPECT_TRUE(validate(p).has_value());
  p = SamplingParams{};
  p.min_p = std::nanf("");
  EXPECT_TRUE(validate(p).has_value());
  p = SamplingParams{};
  p.repeat_last_n = -2;
  EXPECT_TRUE(validate(p).has_value());
  p = SamplingParams{};
  p.typical_p = 1.5f;
  ASSERT_TRUE(validate(p).has_value());
  EXPECT_NE(validate(p)->find("typical_p"), std::string::npos);
  Sampler ok(SamplingParams{});
  EXPECT_THROW(ok.sample(std::span<const float>{}, {}), Error);
}

// Direct log-softmax in long double, written out independently of the code under test.
std::vector<double> reference_log_softmax(const std::vector<float>& logits) {
  long double z = 0;
  for (float l : logits) z += std::exp(static_cast<long double>(l));
  std::vector<double> out;
  for (float l : logits) out.push_back(static_cast<double>(static_cast<long double>(l) - std::log(z)));
  return out;
}

TEST(TopLogprobs, MatchesDirectLogSoftmaxSortedDescending) {
  const std::vector<float> logits{0.3f, -1.2f, 2.5f, 0.3f, 1.7f, -4.0f, 2.5f};
  const auto ref = reference_log_softmax(logits);
  const auto top = top_logprobs(logits, 4);
  ASSERT_EQ(top.size(), 4u);
  // By hand: 2.5 (ids 2, 6: tie -> lower id first), 1.7 (id 4), 0.3 (ids 0, 3: id 0 wins the last place).
  const std::array<int32_t, 4> ids{2, 6, 4, 0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(top[i].token, ids[i]) << i;
    EXPECT_NEAR(top[i].logprob, ref[static_cast<size_t>(ids[i])], 1e-6) << i;
  }
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(token_logprob(logits, static_cast<int32_t>(i)), ref[i], 1e-6) << i;
}

TEST(TopLogprobs, AllTokensSumToOneAndRequestsLargerThanVocabAreClamped) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(1000);
  for (float& l : logits) l = normal(rng) + 30.0f;  // large offsets must not overflow exp
  const auto all = top_logprobs(logits, 5000);
  ASSERT_EQ(all.size(), logits.size());
  double sum = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    sum += std::exp(static_cast<double>(all[i].logprob));
    if (i > 0) {
      EXPECT_LE(all[i].logprob, all[i - 1].logprob) << i;
    }
  }
  EXPECT_NEAR(sum, 1.0, 1e-4);
  const auto ref = reference_log_softmax(logits);
  const auto top20 = top_logprobs(logits, 20);
  ASSERT_EQ(top20.size(), 20u);
  const double best_ref = *std::max_element(ref.begin(), ref.end());
  EXPECT_NEAR(top20[0].logprob, best_ref, 1e-5);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(top20[i].token, all[i].token);
    EXPECT_NEAR(top20[i].logprob, ref[static_cast<size_t>(top20[i].token)], 1e-5);
  }
  EXPECT_TRUE(top_logprobs(logits, 0).empty());
  long double z = 0;
  for (float l : logits) z += std::exp(static_cast<long double>(l));
  EXPECT_NEAR(log_sum_exp(logits), static_cast<double>(std::log(z)), 1e-6);
}

}  // namespace
}  // namespace kvtrie
