// The KV events the cache publishes for routers (cache/kv_event_sink.h), on scripted cache histories: what
// a new page, a decode that fills a page, a demotion, a promotion, an eviction and a flush publish, that
// the hashes chain as cache/page_hash.h defines and differ between namespaces, and that partial pages stay
// unpublished. The seeded random workload of test_cache_random.cpp checks the rebuilt index after every step.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/kv_cache.h"
#include "tests/cache/kv_event_index.h"
#include "tests/cache/simulated_kv.h"

namespace kvtrie {
namespace {

constexpr std::uint32_t kP = 4;

class Recorder final : public KvEventSink {
 public:
  void publish(KvEvent event) override {
    index.publish(event);
    log.push_back(std::move(event));
  }
  test::KvEventIndex index;
  std::vector<KvEvent> log;
};

struct Harness {
  explicit Harness(std::uint32_t device_pages = 64, std::uint32_t host_pages = 64)
      : copier(kP, device_pages, host_pages), cache({kP, 1, device_pages, host_pages}, copier) {
    cache.set_event_sink(&events);
  }
  // Runs a whole request: the prompt, then `decode` tokens one at a time; returns the tokens reused.
  std::uint32_t run(NamespaceId ns, std::vector<TokenId> tokens, std::size_t decode = 0) {
    const AcquireResult r = cache.acquire(ns, tokens);
    cache.sync();
    EXPECT_EQ(cache.reserve(r.seq, static_cast<std::uint32_t>(tokens.size())), ReserveStatus::Ok);
    cache.commit(r.seq, std::span(tokens).subspan(r.cached_tokens));
    for (std::size_t i = 0; i < decode; ++i) {
      const TokenId next = static_cast<TokenId>(100 + i);
      tokens.push_back(next);
      EXPECT_EQ(cache.reserve(r.seq, static_cast<std::uint32_t>(tokens.size())), ReserveStatus::Ok);
      cache.commit(r.seq, std::span(&next, 1));
    }
    cache.release(r.seq);
    cache.check_invariants();
    EXPECT_EQ(events.index.differs_from(cache.page_hashes()), "");
    EXPECT_TRUE(events.index.errors().empty()) << events.index.errors().front();
    return r.cached_tokens;
  }
  test::SimulatedCopier copier;
  KvCache cache;
  Recorder events;
};

std::vector<TokenId> iota_tokens(std::size_t n, TokenId first = 1) {
  std::vector<TokenId> tokens(n);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

TEST(KvEvents, NewPagesAreStoredOnDeviceWithChainedHashesAndPartialPagesStayUnpublished) {
  Harness h;
  const std::vector<TokenId> prompt = iota_tokens(10);  // two full pages and a partial one
  h.run(7, prompt);
  ASSERT_EQ(h.events.log.size(), 1u);
  const KvEvent& e = h.events.log[0];
  EXPECT_EQ(e.kind, KvEvent::Kind::Stored);
  EXPECT_EQ(e.tier, Tier::Device);
  EXPECT_FALSE(e.parent.has_value()) << "a namespace's first page has no parent block";
  EXPECT_EQ(e.page_tokens, kP);
  ASSERT_EQ(e.hashes.size(), 2u);
  EXPECT_EQ(e.tokens, std::vector<TokenId>(prompt.begin(), prompt.begin() + 8));
  const PageHash first = chain_page_hash(namespace_page_seed(7), std::span(prompt).first(kP));
  EXPECT_EQ(e.hashes[0], first);
  EXPECT_EQ(e.hashes[1], chain_page_hash(first, std::span(prompt).subspan(kP, kP)));
}

TEST(KvEvents, DecodingThatFillsAPageStoresItWithItsParent) {
  Harness h;
  h.run(1, iota_tokens(6), /*decode=*/3);  // 6 + 3 = 9 tokens: the second page fills during decode
  ASSERT_EQ(h.events.log.size(), 2u);
  EXPECT_EQ(h.events.log[0].hashes.size(), 1u);
  const KvEvent& filled = h.events.log[1];
  EXPECT_EQ(filled.kind, KvEvent::Kind::Stored);
  ASSERT_EQ(filled.hashes.size(), 1u);
  EXPECT_EQ(filled.parent, h.events.log[0].hashes[0]);
  EXPECT_EQ(filled.tokens, (std::vector<TokenId>{5, 6, 100, 101}));
}

TEST(KvEvents, TheSameTokensInTwoNamespacesHaveDisjointHashes) {
  Harness h;
  h.run(1, iota_tokens(17));
  h.run(2, iota_tokens(17));
  const PageHashListing listing = h.cache.page_hashes();
  ASSERT_EQ(listing.device.size(), 8u);
  const std::set<PageHash> unique(listing.device.begin(), listing.device.end());
  EXPECT_EQ(unique.size(), 8u);
}

TEST(KvEvents, DemotionAndPromotionMovePagesBetweenTiersRemovingBeforeStoring) {
  Harness h(/*device_pages=*/4, /*host_pages=*/8);
  const std::vector<TokenId> a = iota_tokens(13, 1), b = iota_tokens(13, 50);
  h.run(1, a);  // 4 device pages: the tier is full
  h.events.log.clear();
  h.run(1, b);  // b needs room: a's pages go to host
  std::size_t removed_device = 0, stored_host = 0;
  bool order_ok = true;
  for (const KvEvent& e : h.events.log) {
    if (e.kind == KvEvent::Kind::Removed && e.tier == Tier::Device) removed_device += e.hashes.size();
    if (e.kind == KvEvent::Kind::Stored && e.tier == Tier::Host) {
      order_ok = order_ok && removed_device >= stored_host + e.hashes.size();
      stored_host += e.hashes.size();
    }
  }
  EXPECT_GT(stored_host, 0u) << "nothing was demoted";
  EXPECT_TRUE(order_ok) << "a page was stored on host before it was removed from device";
  EXPECT_FALSE(h.events.index.held(Tier::Host).empty());

  h.events.log.clear();
  EXPECT_GT(h.run(1, a), 0u);  // a hit on host pages promotes them
  bool promoted = false;
  for (const KvEvent& e : h.events.log)
    if (e.kind == KvEvent::Kind::Removed && e.tier == Tier::Host) promoted = true;
  EXPECT_TRUE(promoted);
}

TEST(KvEvents, EvictionWithoutAHostTierRemovesFromDevice) {
  Harness h(/*device_pages=*/4, /*host_pages=*/0);
  h.run(1, iota_tokens(13, 1));
  h.run(1, iota_tokens(13, 50));
  EXPECT_GT(h.events.index.events(KvEvent::Kind::Removed), 0u);
  EXPECT_TRUE(h.events.index.held(Tier::Host).empty());
}

TEST(KvEvents, FlushOfAnIdleCacheIsOneClearedAndOfABusyOneRemovesWhatItDrops) {
  Harness h;
  h.run(1, iota_tokens(9));
  h.run(2, iota_tokens(9));
  h.events.log.clear();
  h.cache.flush();
  ASSERT_EQ(h.events.log.size(), 1u);
  EXPECT_EQ(h.events.log[0].kind, KvEvent::Kind::Cleared);
  EXPECT_EQ(h.events.index.differs_from(h.cache.page_hashes()), "");

  h.run(1, iota_tokens(9));
  const std::vector<TokenId> busy = iota_tokens(9, 40);
  const AcquireResult running = h.cache.acquire(1, busy);
  ASSERT_EQ(h.cache.reserve(running.seq, 9), ReserveStatus::Ok);
  h.cache.commit(running.seq, busy);
  h.events.log.clear();
  h.cache.flush();
  for (const KvEvent& e : h.events.log) EXPECT_EQ(e.kind, KvEvent::Kind::Removed);
  EXPECT_EQ(h.events.index.differs_from(h.cache.page_hashes()), "");
  EXPECT_EQ(h.events.index.held(Tier::Device).size(), 2u) << "the running sequence's pages stay";
  h.cache.release(running.seq);
  EXPECT_TRUE(h.events.index.errors().empty());
}

}  // namespace
}  // namespace kvtrie
