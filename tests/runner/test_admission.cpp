// The scheduler's admission arithmetic (runner/engine/admission.h), with no GPU: the never-fits rule at its
// boundary, the growth promise, the cost of a waiting request, and, against a real KvCache over simulated
// pages, that the cost bounds what starting the request takes from the reclaimable device pages (so a
// request admitted by may_start never takes the room promised to running sequences).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "cache/kv_cache.h"
#include "runner/engine/admission.h"
#include "tests/cache/simulated_kv.h"

namespace kvtrie::engine {
namespace {

TEST(Admission, NeverFitsRejectsOnlyWhatExceedsTheWholeDeviceTier) {
  // 8 pages of 16 tokens, one kept as copy-on-write slack: 112 tokens fit, 113 do not.
  EXPECT_FALSE(never_fits(20, 92, 4096, 16, 8).has_value());
  const auto message = never_fits(20, 93, 4096, 16, 8);
  ASSERT_TRUE(message.has_value());
  EXPECT_NE(message->find("113 tokens"), std::string::npos) << *message;
  EXPECT_NE(message->find("112 tokens"), std::string::npos) << *message;
  // max_tokens -1 means "up to the context", and the context caps a larger max_tokens.
  EXPECT_TRUE(never_fits(20, -1, 256, 16, 8).has_value());
  EXPECT_FALSE(never_fits(20, -1, 112, 16, 8).has_value());
  EXPECT_FALSE(never_fits(20, 100000, 112, 16, 8).has_value());
  EXPECT_TRUE(never_fits(1, 0, 112, 16, 0).has_value());
}

TEST(Admission, PromiseIsTheHeldTokensPlusOnePageWithinTheLongestSequence) {
  EXPECT_EQ(promised_pages(20, 1000, 16), 3u);  // 2 pages of tokens + 1 of growth
  EXPECT_EQ(promised_pages(32, 1000, 16), 3u);
  EXPECT_EQ(promised_pages(33, 1000, 16), 4u);
  EXPECT_EQ(promised_pages(20, 21, 16), 2u);  // it can never grow past 21 tokens: 2 pages
  EXPECT_EQ(outstanding_pages(20, 1000, 1, 16), 2u);
  EXPECT_EQ(outstanding_pages(20, 1000, 5, 16), 0u);  // holds more than promised: owes nothing
}

TEST(Admission, CostCountsFreshPagesAndTheCachedPagesItWouldPin) {
  AdmissionInput in;
  in.tokens = 100;  // 7 pages + 1 of growth
  in.max_tokens_total = 1000;
  EXPECT_EQ(admission_cost(in, 16), 8u);
  in.device_reused_tokens = 64;  // 4 whole pages shared, already pinned by a running sequence
  EXPECT_EQ(admission_cost(in, 16), 4u);
  in.unpinned_device_pages = 4;  // ... or pinned by nobody: pinning takes them from the reclaimable set
  EXPECT_EQ(admission_cost(in, 16), 8u);
  in.device_reused_tokens = 70;  // the partial fifth page is copied on write: not shared
  in.unpinned_device_pages = 0;
  EXPECT_EQ(admission_cost(in, 16), 4u);
  in.device_reused_tokens = 64;  // a partial fifth page on host: promoted, then copied on write
  in.host_reused_tokens = 6;
  EXPECT_EQ(admission_cost(in, 16), 5u);
  in.host_reused_tokens = 16;  // a whole promoted page is the sequence's own fifth page
  EXPECT_EQ(admission_cost(in, 16), 4u);
}

TEST(Admission, MayStartWhenCostAndPromisesFitOrNothingRuns) {
  EXPECT_TRUE(may_start(4, 10, 6, false));
  EXPECT_FALSE(may_start(5, 10, 6, false));
  EXPECT_TRUE(may_start(50, 10, 0, true));
}

TEST(Admission, OnlyALonePromptTakesTheWholeStep) {
  EXPECT_EQ(step_prefill_budget(2048, 0, 1, 512), 2048u);  // alone: the whole step
  EXPECT_EQ(step_prefill_budget(2048, 0, 2, 512), 512u);   // another prompt waits on the step
  EXPECT_EQ(step_prefill_budget(2048, 3, 1, 512), 509u);   // decodes wait on it: 512 in all
  EXPECT_EQ(step_prefill_budget(600, 100, 1, 512), 412u);
  EXPECT_EQ(step_prefill_budget(256, 4, 2, 512), 252u);  // a step smaller than the cap
  EXPECT_EQ(step_prefill_budget(64, 64, 1, 512), 0u);    // the decodes fill the step
  EXPECT_EQ(step_prefill_budget(64, 80, 1, 512), 0u);
}

// A seeded random workload on a small cache: requests sharing a few prefixes start, grow within their
// promise, and end. Before each start, the cost computed from preview_acquire() must bound the drop in
// reclaimable device pages that acquire() + reserve(promise) cause, and whenever may_start() says yes the
// reservation must succeed and leave every running sequence's outstanding promise reclaimable.
TEST(Admission, CostBoundsWhatStartingTakesFromTheDeviceTier) {
  constexpr uint32_t P = 4;
  constexpr uint32_t kDevice = 20, kHost = 24;
  test::SimulatedCopier copier(P, kDevice, kHost);
  KvCache cache(KvCacheConfig{P, 64, kDevice * 64, kHost * 64}, copier);
  struct Seq {
    SeqId id;
    std::vector<TokenId> tokens;  // committed
    uint32_t max_total;
  };
  std::vector<Seq> running;
  std::mt19937 rng(2024);
  auto uniform = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  const NamespaceId ns = 1;
  uint32_t admitted = 0, refused = 0;
  for (int step = 0; step < 2000; ++step) {
    const uint32_t action = uniform(0, 9);
    if (action < 4 && running.size() < 6) {
      std::vector<TokenId> prompt(uniform(0, 2) * 8, 0);
      std::iota(prompt.begin(), prompt.end(), 100 * static_cast<TokenId>(uniform(0, 2)));  // shared prefixes
      for (uint32_t i = uniform(1, 14); i > 0; --i)
        prompt.push_back(static_cast<TokenId>(uniform(1000, 1003)));
      const uint32_t max_total = static_cast<uint32_t>(prompt.size()) + uniform(1, 20);
      uint64_t outstanding = 0;
      for (const Seq& s : running)
        outstanding += outstanding_pages(static_cast<uint32_t>(s.tokens.size()), s.max_total,
                                         static_cast<uint32_t>(cache.page_table(s.id).size()), P);
      const KvCache::ReusePreview reuse = cache.preview_acquire(ns, prompt);
      AdmissionInput in{static_cast<uint32_t>(prompt.size()), max_total, reuse.device_tokens,
                        reuse.host_tokens, reuse.unpinned_device_pages};
      const uint32_t cost = admission_cost(in, P);
      const uint32_t before = cache.reclaimable_device_pages();
      if (!may_start(cost, before, outstanding, running.empty())) {
        ++refused;
        continue;
      }
      const AcquireResult r = cache.acquire(ns, prompt);
      cache.sync();
      const uint32_t promise = promised_pages(static_cast<uint32_t>(prompt.size()), max_total, P);
      ASSERT_EQ(cache.reserve(r.seq, promise * P), ReserveStatus::Ok) << "step " << step;
      const uint32_t after = cache.reclaimable_device_pages();
      ASSERT_LE(int64_t{before} - int64_t{after}, int64_t{cost})
          << "step " << step << ": it took more than its cost; prompt " << prompt.size() << " dev "
          << reuse.device_tokens << " host " << reuse.host_tokens << " unpinned "
          << reuse.unpinned_device_pages << " cached " << r.cached_tokens << " host hit " << r.host_hit_tokens
          << " cow " << r.copied_on_write << " promise " << promise << " table "
          << cache.page_table(r.seq).size();
      ASSERT_GE(after, outstanding) << "step " << step << ": a running sequence lost its promised room";
      cache.check_invariants();
      ++admitted;
      // The model computes the prompt: its KV is committed.
      copier.write(cache.page_table(r.seq), test::kv_values(ns, prompt), r.cached_tokens, prompt.size());
      cache.commit(r.seq, std::span<const TokenId>(prompt).subspan(r.cached_tokens));
      running.push_back({r.seq, prompt, max_total});
    } else if (action < 8 && !running.empty()) {
      // Decode a few tokens within the pages the sequence holds.
      Seq& s = running[uniform(0, static_cast<uint32_t>(running.size()) - 1)];
      const auto held = static_cast<uint32_t>(cache.page_table(s.id).size()) * P;
      const auto room = static_cast<uint32_t>(std::min<size_t>(held, s.max_total) - s.tokens.size());
      std::vector<TokenId> more(std::min(room, uniform(0, 5)));
      for (TokenId& t : more) t = static_cast<TokenId>(uniform(2000, 2001));
      std::vector<TokenId> all = s.tokens;
      all.insert(all.end(), more.begin(), more.end());
      copier.write(cache.page_table(s.id), test::kv_values(ns, all), s.tokens.size(), all.size());
      cache.commit(s.id, more);
      s.tokens = std::move(all);
    } else if (!running.empty()) {
      const size_t i = uniform(0, static_cast<uint32_t>(running.size()) - 1);
      cache.release(running[i].id);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
    cache.check_invariants();
  }
  for (const Seq& s : running) cache.release(s.id);
  EXPECT_GT(admitted, 50u);
  EXPECT_GT(refused, 0u) << "the workload never filled the device tier: the bound was not exercised";
}

}  // namespace
}  // namespace kvtrie::engine
