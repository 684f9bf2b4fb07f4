// KvCache, the façade the scheduler calls: reuse, copy-on-write, sharing between running sequences,
// demotion and promotion through the copier, host pressure, pinned sets larger than the budget, and
// injected allocation failures. Page contents are simulated (simulated_kv.h), so every test also checks
// that the reused positions hold the right KV.
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "base/error.h"
#include "cache/kv_cache.h"
#include "tests/cache/simulated_kv.h"

namespace kvtrie {
namespace {

using test::kv_values;
using test::SimulatedCopier;

constexpr std::uint32_t kP = 4;
constexpr std::size_t kPageBytes = 256;

std::vector<TokenId> range(TokenId first, int n) {
  std::vector<TokenId> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

class KvCacheTest : public ::testing::Test {
 protected:
  void make(std::uint32_t device_pages, std::uint32_t host_pages, double group_share = 1.0) {
    cache_.reset();  // before its copier
    copier_ = std::make_unique<SimulatedCopier>(kP, device_pages, host_pages);
    cache_ = std::make_unique<KvCache>(
        KvCacheConfig{kP, kPageBytes, device_pages * kPageBytes, host_pages * kPageBytes, group_share},
        *copier_);
  }

  // Acquire + sync, and check that every reused position holds the KV of this prompt.
  AcquireResult start(NamespaceId ns, const std::vector<TokenId>& prompt, GroupId group = 0) {
    const AcquireResult r = cache_->acquire(ns, prompt, group);
    cache_->check_invariants();
    cache_->sync();
    cache_->check_invariants();
    EXPECT_EQ(copier_->wrong_positions(cache_->page_table(r.seq), kv_values(ns, prompt), r.cached_tokens),
              0u);
    return r;
  }
  // The model computes the rest of the prompt; its KV is committed.
  void compute(NamespaceId ns, const AcquireResult& r, const std::vector<TokenId>& prompt) {
    ASSERT_EQ(cache_->reserve(r.seq, static_cast<std::uint32_t>(prompt.size())), ReserveStatus::Ok);
    copier_->write(cache_->page_table(r.seq), kv_values(ns, prompt), r.cached_tokens, prompt.size());
    cache_->commit(r.seq, std::span(prompt).subspan(r.cached_tokens));
    cache_->check_invariants();
  }
  // A whole request: start, compute, release.
  AcquireResult request(NamespaceId ns, const std::vector<TokenId>& prompt, GroupId group = 0) {
    const AcquireResult r = start(ns, prompt, group);
    compute(ns, r, prompt);
    cache_->release(r.seq);
    cache_->check_invariants();
    return r;
  }

  void TearDown() override {
    if (!cache_) return;
    EXPECT_EQ(cache_->live_sequences(), 0u) << "a test left a sequence running";
    cache_->sync();
    cache_->check_invariants();
    EXPECT_EQ(cache_->leases_outstanding(), 0u) << "a test left pages leased";
    const KvCacheStats s = cache_->stats();
    EXPECT_EQ(s.device_pages_used, s.device_pages_cached) << "device pages held outside the trie";
    EXPECT_EQ(s.host_pages_used, s.host_pages_cached) << "host pages held outside the trie";
    EXPECT_LE(s.device_bytes_used, s.device_bytes_budget);
    EXPECT_LE(s.host_bytes_used, s.host_bytes_budget);
  }

  std::unique_ptr<SimulatedCopier> copier_;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(KvCacheTest, SecondRequestReusesAllButTheLastTokenWithCopyOnWrite) {
  make(32, 0);
  const auto prompt = range(10, 20);
  const AcquireResult cold = request(1, prompt);
  EXPECT_EQ(cold.cached_tokens, 0u);
  const AcquireResult warm = request(1, prompt);
  EXPECT_EQ(warm.cached_tokens, 19u);  // the last prompt token is always computed
  EXPECT_EQ(warm.device_hit_tokens, 19u);
  EXPECT_TRUE(warm.copied_on_write);  // 19 % 4 != 0: the shared last page was copied first
  EXPECT_EQ(copier_->count(Tier::Device, Tier::Device), 1u);
  const KvCacheStats s = cache_->stats();
  EXPECT_EQ(s.hit_tokens_device, 19u);
  EXPECT_EQ(s.miss_tokens, 20u + 1u);
  EXPECT_EQ(s.cow_pages, 1u);
  EXPECT_EQ(s.copy_bytes, kPageBytes);
}

TEST_F(KvCacheTest, PageAlignedReuseNeedsNoCopy) {
  make(32, 0);
  request(1, range(10, 8));
  auto longer = range(10, 8);
  longer.insert(longer.end(), {70, 71, 72});
  const AcquireResult r = request(1, longer);
  EXPECT_EQ(r.cached_tokens, 8u);
  EXPECT_FALSE(r.copied_on_write);
  EXPECT_TRUE(copier_->log().empty());
}

TEST_F(KvCacheTest, RunningSequencesSharePrefixPagesWithoutCopies) {
  make(32, 0);
  const auto system = range(10, 8);
  request(1, system);  // caches the system prompt
  auto a = system, b = system;
  a.insert(a.end(), {50, 51, 52});
  b.insert(b.end(), {60, 61});
  const AcquireResult ra = start(1, a);
  const AcquireResult rb = start(1, b);
  EXPECT_EQ(ra.cached_tokens, 8u);
  EXPECT_EQ(rb.cached_tokens, 8u);
  const auto ta = cache_->page_table(ra.seq), tb = cache_->page_table(rb.seq);
  ASSERT_EQ(ta.size(), 2u);
  EXPECT_TRUE(std::equal(ta.begin(), ta.end(), tb.begin(), tb.end()));
  compute(1, ra, a);
  compute(1, rb, b);
  EXPECT_NE(cache_->page_table(ra.seq)[2], cache_->page_table(rb.seq)[2]);
  cache_->release(ra.seq);
  cache_->release(rb.seq);
  EXPECT_TRUE(copier_->log().empty());
  EXPECT_EQ(cache_->peek(1, a).matched_tokens, a.size());
  EXPECT_EQ(cache_->peek(1, b).matched_tokens, b.size());
}

TEST_F(KvCacheTest, DivergenceInsideACachedPageCopiesThatPageOnly) {
  make(32, 0);
  request(1, range(10, 12));
  auto other = range(10, 6);
  other.insert(other.end(), {99, 98, 97});
  const AcquireResult r = request(1, other);
  EXPECT_EQ(r.cached_tokens, 6u);
  EXPECT_TRUE(r.copied_on_write);
  ASSERT_EQ(copier_->log().size(), 1u);
  EXPECT_EQ(copier_->log()[0].from, cache_->peek(1, range(10, 12)).pages[1].page);
  // Both branches stay cached, each with its own second page.
  EXPECT_EQ(cache_->peek(1, range(10, 12)).matched_tokens, 12u);
  EXPECT_EQ(cache_->peek(1, other).matched_tokens, other.size());
}

TEST_F(KvCacheTest, CommittingDecodeStepsExtendsTheCachedSequence) {
  make(32, 0);
  const auto prompt = range(10, 5);
  const AcquireResult r = start(1, prompt);
  compute(1, r, prompt);
  std::vector<TokenId> all = prompt;
  for (TokenId t = 200; t < 207; ++t) {  // seven decode steps, one token each
    all.push_back(t);
    ASSERT_EQ(cache_->reserve(r.seq, static_cast<std::uint32_t>(all.size())), ReserveStatus::Ok);
    copier_->write(cache_->page_table(r.seq), kv_values(1, all), all.size() - 1, all.size());
    cache_->commit(r.seq, std::span(all).last(1));
    cache_->check_invariants();
  }
  cache_->release(r.seq);
  EXPECT_EQ(cache_->peek(1, all).matched_tokens, all.size());
  EXPECT_EQ(cache_->stats().trie_nodes, 1u);
  all.push_back(300);
  EXPECT_EQ(request(1, all).cached_tokens, all.size() - 1);
}

// Regression: a request that recomputed a continuation the trie already held (a cached conversation replayed
// token by token, e.g. the same seeded request twice) kept its own copy of every page while its lease pinned
// the trie's copy, so it held twice its length in device pages and a lone request that fit the device tier
// found no page.
TEST_F(KvCacheTest, RecomputingACachedContinuationSharesTheTriesFullPages) {
  make(8, 0);
  const auto all = range(10, 15);  // 4 pages: a prompt of 5 tokens and 10 "generated" ones
  request(1, all);
  const std::vector<TokenId> prompt(all.begin(), all.begin() + 5);
  const AcquireResult r = start(1, prompt);
  EXPECT_EQ(r.cached_tokens, 4u);
  std::size_t committed = r.cached_tokens;
  for (std::size_t n = 5; n <= all.size(); ++n) {  // one decode step at a time, as the scheduler does
    ASSERT_EQ(cache_->reserve(r.seq, static_cast<std::uint32_t>(n)), ReserveStatus::Ok);
    copier_->write(cache_->page_table(r.seq), kv_values(1, all), committed, n);
    cache_->commit(r.seq, std::span(all).subspan(committed, n - committed));
    committed = n;
    cache_->check_invariants();
    // Trie pages (4) plus at most the sequence's own copy of the page it is writing.
    EXPECT_LE(cache_->stats().device_pages_used, 5u) << "after " << n << " tokens";
  }
  const auto table = cache_->page_table(r.seq);
  const MatchResult cached = cache_->peek(1, all);
  for (std::size_t i = 0; i + 1 < table.size(); ++i)
    EXPECT_EQ(table[i], cached.pages[i].page) << "page " << i;
  EXPECT_EQ(copier_->wrong_positions(table, kv_values(1, all), all.size()), 0u);
  cache_->release(r.seq);
}

TEST_F(KvCacheTest, PreviewAcquireCountsTheUnpinnedDevicePagesAcquireWouldPin) {
  make(16, 8);
  const auto system = range(10, 8);  // 2 pages
  request(1, system);
  auto a = system;
  a.insert(a.end(), {50, 51, 52});
  KvCache::ReusePreview before = cache_->preview_acquire(1, a);
  EXPECT_EQ(before.device_tokens, 8u);
  EXPECT_EQ(before.unpinned_device_pages, 2u);
  const std::uint32_t reclaimable = cache_->reclaimable_device_pages();
  const AcquireResult ra = start(1, a);
  EXPECT_EQ(cache_->reclaimable_device_pages(), reclaimable - 2u) << "pinning took the two shared pages";
  // Now the system prompt is pinned: a second conversation pins nothing new.
  auto b = system;
  b.insert(b.end(), {60, 61});
  EXPECT_EQ(cache_->preview_acquire(1, b).unpinned_device_pages, 0u);
  EXPECT_EQ(cache_->preview_acquire(1, b).device_tokens, 8u);
  cache_->release(ra.seq);
  EXPECT_EQ(cache_->preview_acquire(1, b).unpinned_device_pages, 2u);
}

TEST_F(KvCacheTest, NamespacesDoNotShare) {
  make(32, 0);
  request(1, range(10, 9));
  EXPECT_EQ(request(2, range(10, 9)).cached_tokens, 0u);
  EXPECT_EQ(request(1, range(10, 9)).cached_tokens, 8u);
}

TEST_F(KvCacheTest, DevicePressureDemotesColdPagesAndAHitPromotesThem) {
  make(6, 16);
  const auto a = range(10, 16), b = range(500, 16);  // 4 pages each; the device holds 6
  request(1, a);
  request(1, b);  // needs 4 pages: 2 free, so a's 2 coldest pages go to host
  KvCacheStats s = cache_->stats();
  EXPECT_EQ(s.demoted_pages, 2u);
  EXPECT_EQ(s.evicted_device_pages, 0u);
  EXPECT_EQ(copier_->count(Tier::Device, Tier::Host), 2u);
  const MatchResult before = cache_->peek(1, a);
  EXPECT_EQ(before.matched_tokens, 16u);
  EXPECT_EQ(before.host_tokens, 8u);  // the tail of a went to host; its head stays on device

  const AcquireResult r = start(1, a);  // start() checks the promoted pages' contents after sync
  EXPECT_EQ(r.cached_tokens, 15u);
  EXPECT_EQ(r.host_hit_tokens, 7u);
  EXPECT_EQ(r.device_hit_tokens, 8u);
  s = cache_->stats();
  EXPECT_EQ(s.promoted_pages, 2u);
  EXPECT_EQ(copier_->count(Tier::Host, Tier::Device), 2u);
  EXPECT_EQ(s.hit_tokens_host, 7u);
  compute(1, r, a);
  cache_->release(r.seq);
  EXPECT_EQ(cache_->peek(1, a).device_tokens, 16u);
  EXPECT_EQ(cache_->peek(1, b).matched_tokens, 16u);  // b was demoted, not lost
}

// --tenant-kv-share: group 1 floods the device tier with new prompts; group 2's prefix, though the coldest,
// stays on device because group 1 is over its share and has cold pages of its own. Without a share the same
// flood pushes group 2's prefix out (the control, so the test can fail).
TEST_F(KvCacheTest, AGroupOverItsShareEvictsItsOwnColdPagesFirst) {
  const auto kept = range(1000, 16);  // 4 pages of group 2
  for (const double share : {0.5, 1.0}) {
    SCOPED_TRACE(share);
    make(8, 0, share);
    request(2, kept, 2);
    for (int i = 0; i < 4; ++i) request(1, range(100 * (i + 1), 16), 1);  // 4 pages each: twice the tier
    const bool expect_kept = share < 1.0;
    EXPECT_EQ(cache_->peek(2, kept).device_tokens, expect_kept ? 16u : 0u);
    // Group 1 keeps what fits its share (4 pages): its newest prompt.
    EXPECT_EQ(cache_->peek(1, range(400, 16)).device_tokens, 16u);
    if (expect_kept) {
      EXPECT_EQ(cache_->peek(1, range(300, 16)).matched_tokens, 0u);
    }
    EXPECT_EQ(request(2, kept, 2).cached_tokens, expect_kept ? 15u : 0u);
    cache_->check_invariants();
  }
}

TEST_F(KvCacheTest, AGroupWithinItsShareEvictsTheGlobalColdestAndRequestsOfNoGroupAreNotLimited) {
  make(8, 0, 0.5);
  request(2, range(1000, 16), 2);  // group 2: 4 pages
  request(1, range(100, 8), 1);    // group 1: 2 pages, within its share of 4
  request(1, range(200, 8), 1);    // 4 pages in all, still within: the tier is full
  request(1, range(300, 4), 1);    // 1 more would be 5 > 4: its own coldest goes
  EXPECT_EQ(cache_->peek(2, range(1000, 16)).device_tokens, 16u);
  EXPECT_EQ(cache_->peek(1, range(100, 8)).device_tokens, 4u);  // the tail of its coldest prompt
  // Requests of no group take the global coldest, whatever the groups hold.
  request(7, range(5000, 16));
  EXPECT_EQ(cache_->peek(2, range(1000, 16)).device_tokens, 0u);
}

TEST_F(KvCacheTest, HostPressureDropsTheColdestHostPages) {
  make(4, 4);
  const auto a = range(10, 16), b = range(500, 16), c = range(900, 16);  // 4 pages each
  request(1, a);
  request(1, b);  // a -> host
  EXPECT_EQ(cache_->peek(1, a).host_tokens, 16u);
  request(1, c);  // b -> host, which is full: a, the coldest, is dropped
  EXPECT_EQ(cache_->peek(1, a).matched_tokens, 0u);
  EXPECT_EQ(cache_->peek(1, b).host_tokens, 16u);
  EXPECT_EQ(cache_->peek(1, c).device_tokens, 16u);
  EXPECT_EQ(cache_->stats().evicted_host_pages, 4u);
}

TEST_F(KvCacheTest, WithoutAHostTierColdPagesAreDropped) {
  make(4, 0);
  request(1, range(10, 16));
  request(1, range(500, 16));
  EXPECT_EQ(cache_->peek(1, range(10, 16)).matched_tokens, 0u);
  EXPECT_EQ(cache_->stats().evicted_device_pages, 4u);
  EXPECT_EQ(cache_->stats().demoted_pages, 0u);
}

TEST_F(KvCacheTest, PinnedPagesAreNeverEvictedAndABudgetTooSmallFailsCleanly) {
  make(4, 4);
  const auto a = range(10, 16);
  const AcquireResult ra = start(1, a);
  compute(1, ra, a);  // a holds every device page, pinned
  const AcquireResult rb = start(1, range(500, 8));
  EXPECT_EQ(cache_->reclaimable_device_pages(), 0u);
  EXPECT_EQ(cache_->reserve(rb.seq, 8), ReserveStatus::NoRoom);
  cache_->check_invariants();
  EXPECT_EQ(cache_->page_table(rb.seq).size(), 0u);
  EXPECT_EQ(cache_->peek(1, a).device_tokens, 16u);
  EXPECT_EQ(copier_->wrong_positions(cache_->page_table(ra.seq), kv_values(1, a), a.size()), 0u);
  cache_->release(ra.seq);
  EXPECT_EQ(cache_->reclaimable_device_pages(), 4u);
  EXPECT_EQ(cache_->reserve(rb.seq, 8), ReserveStatus::Ok);  // a is unpinned now: demoted to make room
  cache_->release(rb.seq);
  EXPECT_EQ(cache_->stats().demoted_pages, 2u);
}

TEST_F(KvCacheTest, PromotionWithoutDeviceRoomFallsBackToTheDevicePart) {
  make(4, 8);
  const auto a = range(10, 16);
  request(1, a);
  request(1, range(500, 16));  // a -> host entirely
  const auto other = range(900, 16);
  const AcquireResult pin = start(1, other);
  compute(1, pin, other);  // pins all 4 device pages
  const AcquireResult r = start(1, a);
  EXPECT_EQ(r.cached_tokens, 0u);
  EXPECT_EQ(cache_->stats().failed_promotions, 1u);
  cache_->release(r.seq);
  cache_->release(pin.seq);
}

TEST_F(KvCacheTest, ReleaseBeforeSyncKeepsPagesOfCopiesInFlight) {
  // Regression: a sequence released before sync() freed its copy-on-write page while the copy into it
  // was still queued; the next reserve() handed that page to another sequence, whose freshly written KV
  // the late copy then overwrote (wrong tokens after a cancelled request).
  make(16, 0);
  const auto a = range(10, 6);
  const AcquireResult ra = start(1, a);
  compute(1, ra, a);                                          // a stays running, page 1 of a is partial
  const AcquireResult rb = cache_->acquire(1, range(10, 7));  // reuses 6 tokens: copy-on-write queued
  ASSERT_TRUE(rb.copied_on_write);
  const PageId cow_page = cache_->page_table(rb.seq)[1];
  cache_->release(rb.seq);  // cancelled before its copy ran
  cache_->check_invariants();
  EXPECT_EQ(cache_->device_pool().refcount(cow_page), 1u) << "the copy's destination must stay allocated";
  auto longer = a;
  longer.insert(longer.end(), {40, 41, 42, 43, 44, 45});
  ASSERT_EQ(cache_->reserve(ra.seq, static_cast<std::uint32_t>(longer.size())), ReserveStatus::Ok);
  for (PageId p : cache_->page_table(ra.seq)) EXPECT_NE(p, cow_page);
  copier_->write(cache_->page_table(ra.seq), kv_values(1, longer), a.size(), longer.size());
  cache_->sync();
  EXPECT_EQ(copier_->wrong_positions(cache_->page_table(ra.seq), kv_values(1, longer), longer.size()), 0u);
  EXPECT_EQ(cache_->device_pool().refcount(cow_page), 0u);  // freed once the copy completed
  cache_->release(ra.seq);
}

TEST_F(KvCacheTest, OtherSequencesRunWhileAPromotionIsInFlight) {
  // The scheduler runs ready sequences while a host hit's pages come back (transfer queue overlap): the
  // promoting sequence is not ready until its batch completes, nor is one that starts meanwhile (its path
  // may share the pages still being filled); the host copies are freed only once poll() sees completion.
  make(8, 8);
  const auto cold = range(10, 16), other = range(500, 16);  // 4 pages each: the device is full
  request(1, cold);
  request(1, other);
  const auto busy = range(900, 3);
  const AcquireResult running = start(1, busy);
  ASSERT_EQ(cache_->reserve(running.seq, 3), ReserveStatus::Ok);  // demotes cold's last page
  ASSERT_EQ(cache_->peek(1, cold).host_tokens, 4u);

  auto with = [&](TokenId last) {  // cold plus one new token: reuses 16 tokens, whole pages, no copy-on-write
    auto prompt = cold;
    prompt.push_back(last);
    return prompt;
  };
  const AcquireResult hit = cache_->acquire(1, with(77));  // demotes one of other's pages, then promotes
  ASSERT_EQ(hit.host_hit_tokens, 4u);
  ASSERT_TRUE(cache_->copies_in_flight());
  const int waits = copier_->waits();
  EXPECT_FALSE(cache_->ready(hit.seq));
  const AcquireResult later = cache_->acquire(1, with(78));
  EXPECT_EQ(later.cached_tokens, 16u);
  EXPECT_FALSE(cache_->ready(later.seq));
  cache_->check_invariants();
  const std::uint32_t host_used = cache_->stats().host_pages_used;

  // A step of the running sequence goes ahead meanwhile.
  EXPECT_TRUE(cache_->ready(running.seq));
  compute(1, running, busy);
  cache_->poll();  // nothing completed yet: nothing retired
  EXPECT_TRUE(cache_->copies_in_flight());
  EXPECT_EQ(cache_->stats().host_pages_used, host_used);

  ASSERT_TRUE(copier_->complete_oldest());
  EXPECT_TRUE(cache_->ready(hit.seq));
  EXPECT_TRUE(cache_->ready(later.seq));
  cache_->poll();
  cache_->check_invariants();
  EXPECT_FALSE(cache_->copies_in_flight());
  EXPECT_EQ(cache_->stats().host_pages_used, host_used - 1) << "the promoted page keeps no host copy";
  EXPECT_EQ(copier_->waits(), waits) << "nothing blocked";
  for (const AcquireResult& r : {hit, later})
    EXPECT_EQ(copier_->wrong_positions(cache_->page_table(r.seq), kv_values(1, cold), r.cached_tokens), 0u);
  for (const AcquireResult& r : {running, hit, later}) cache_->release(r.seq);
  cache_->check_invariants();
}

TEST_F(KvCacheTest, ACopyOnWriteSourceStaysAllocatedWhenTheTrieSwapsItForAFullerPage) {
  // Regression (found by the randomized test): B's copy-on-write copy reads the trie's partial page; before
  // it completes, C extends that partial leaf and the trie takes C's fuller page instead, dropping its
  // reference to the old one. The copy must still hold the old page, or reserve() hands it out and the late
  // copy reads someone else's KV.
  make(16, 0);
  const auto a = range(10, 6);
  request(1, a);  // partial leaf: 6 tokens, the second page half full; nobody else holds it
  auto c_tokens = a;
  c_tokens.insert(c_tokens.end(), {50, 51, 52});
  const AcquireResult c = start(1, c_tokens);  // reuses the 6 tokens through its own copy of page 1
  auto b_tokens = a;
  b_tokens.insert(b_tokens.end(), {60, 61});
  const AcquireResult b = cache_->acquire(1, b_tokens);  // copy-on-write of the trie's page: in flight
  ASSERT_TRUE(b.copied_on_write);
  ASSERT_FALSE(cache_->ready(b.seq));
  compute(1, c, c_tokens);  // the trie's partial leaf now ends in C's page; check_invariants() inside
  // Another sequence takes every free page and writes it: the old partial page must not be among them.
  const auto d_tokens = range(700, 40);
  const AcquireResult d = start(1, d_tokens);
  if (cache_->reserve(d.seq, static_cast<std::uint32_t>(d_tokens.size())) == ReserveStatus::Ok)
    copier_->write(cache_->page_table(d.seq), kv_values(1, d_tokens), 0, d_tokens.size());
  cache_->sync();
  cache_->check_invariants();
  EXPECT_EQ(copier_->wrong_positions(cache_->page_table(b.seq), kv_values(1, b_tokens), b.cached_tokens), 0u);
  for (const AcquireResult& r : {b, c, d}) cache_->release(r.seq);
  cache_->check_invariants();
}

TEST_F(KvCacheTest, DestructionWaitsForCopiesInFlight) {
  make(16, 0);
  request(1, range(10, 6));
  const AcquireResult r = cache_->acquire(1, range(10, 7));  // queues a copy-on-write copy
  ASSERT_TRUE(cache_->copies_in_flight());
  cache_->release(r.seq);
  const int waits = copier_->waits();
  cache_.reset();  // the copier's memory may be freed next: the cache must not leave copies running
  EXPECT_EQ(copier_->waits(), waits + 1);
  EXPECT_EQ(copier_->pending(), 0u);
}

TEST_F(KvCacheTest, FlushDropsEverythingUnpinnedOnBothTiers) {
  make(8, 8);
  request(1, range(10, 16));
  request(1, range(500, 16));  // 10.. partly demoted to host
  const auto running = range(900, 9);
  const AcquireResult r = start(1, running);
  compute(1, r, running);  // 3 pinned device pages
  ASSERT_GT(cache_->stats().host_pages_cached, 0u);
  const KvCacheStats before = cache_->stats();
  const std::uint32_t dropped = cache_->flush();
  cache_->check_invariants();
  const KvCacheStats after = cache_->stats();
  EXPECT_EQ(dropped, before.device_pages_cached + before.host_pages_cached - 3);
  EXPECT_EQ(after.device_pages_cached, 3u);
  EXPECT_EQ(after.device_pages_pinned, 3u);
  EXPECT_EQ(after.host_pages_cached, 0u);
  EXPECT_EQ(cache_->peek(1, range(10, 16)).matched_tokens, 0u);
  EXPECT_EQ(cache_->peek(1, running).matched_tokens, running.size());
  EXPECT_EQ(copier_->wrong_positions(cache_->page_table(r.seq), kv_values(1, running), running.size()), 0u);
  cache_->release(r.seq);
}

TEST_F(KvCacheTest, DroppingHostLeavesThatMergeTheVictimIsSafe) {
  // Regression: making host room for a demotion dropped a host leaf, which merged the chosen device
  // victim into its parent; the victim was then demoted after being freed (use after free, exception
  // "demote of a node that is not device-evictable" in the random test).
  make(3, 1);
  const std::vector<TokenId> b = {1, 2, 3, 4, 50, 60, 70, 80};
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8};
  request(1, b);
  request(1, a);              // root -> [1..4] -> {[5..8], [50..80]}: 3 device pages
  request(1, range(100, 3));  // b's leaf, the coldest, goes to the one host page
  EXPECT_EQ(cache_->peek(1, b).host_tokens, 4u);
  request(1, range(200, 3));  // a's leaf is the victim; the host page must be freed first
  cache_->check_invariants();
  EXPECT_EQ(cache_->peek(1, b).matched_tokens, 4u);  // only the shared head is left of b
  const MatchResult ma = cache_->peek(1, a);
  EXPECT_EQ(ma.matched_tokens, 8u);
  EXPECT_EQ(ma.host_tokens, 4u);
  EXPECT_EQ(cache_->stats().demoted_pages, 2u);
  EXPECT_EQ(cache_->stats().evicted_host_pages, 1u);
}

TEST_F(KvCacheTest, InjectedAllocationFailuresNeverLeakOrBreakInvariants) {
  // Fail the Nth allocation of one pool during a workload that reuses, copies on write, demotes and
  // promotes; loop N over every allocation the workload makes, for each pool.
  for (const Tier tier : {Tier::Device, Tier::Host}) {
    for (std::uint64_t n = 1;; ++n) {
      SCOPED_TRACE(std::string(tier_name(tier)) + " allocation " + std::to_string(n));
      make(6, 6);
      PagePool& pool = tier == Tier::Device ? cache_->device_pool() : cache_->host_pool();
      pool.fail_nth_allocation(n);
      for (const auto& prompt : {range(10, 10), range(10, 14), range(500, 9), range(900, 9), range(10, 13)}) {
        const AcquireResult r = start(1, prompt);
        if (cache_->reserve(r.seq, static_cast<std::uint32_t>(prompt.size())) == ReserveStatus::Ok) {
          copier_->write(cache_->page_table(r.seq), kv_values(1, prompt), r.cached_tokens, prompt.size());
          cache_->commit(r.seq, std::span(prompt).subspan(r.cached_tokens));
        }
        cache_->check_invariants();
        cache_->release(r.seq);
        cache_->check_invariants();
      }
      const bool reached = !pool.injected_failure_pending();
      TearDown();
      if (!reached) {
        EXPECT_GT(n, 5u) << "the workload makes too few allocations to test anything";
        break;
      }
    }
  }
  EXPECT_GT(cache_->stats().demoted_pages, 0u);  // the last (failure-free) run exercised the host tier
}

TEST_F(KvCacheTest, CheckInvariantsCatchesAPageHeldOutsideTheBooks) {
  make(8, 0);
  request(1, range(10, 9));
  const PageId stray = *cache_->device_pool().allocate();  // a reference nobody accounts for
  EXPECT_THROW(cache_->check_invariants(), Error);
  cache_->device_pool().release(stray);
  cache_->check_invariants();
}

}  // namespace
}  // namespace kvtrie
