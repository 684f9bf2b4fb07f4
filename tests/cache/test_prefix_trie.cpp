// PrefixTrie on its own (no KvCache, no copier): matching, splitting, merging, namespaces, LRU order,
// pins, tier moves and the accounting, with check_invariants() after every mutation.
#include <gtest/gtest.h>

#include <numeric>

#include "base/error.h"
#include "cache/prefix_trie.h"

namespace kvtrie {
namespace {

constexpr std::uint32_t kP = 4;  // tokens per page: small, so a dozen tokens exercise every page case

std::vector<TokenId> seq(std::initializer_list<TokenId> t) {
  return t;
}
std::vector<TokenId> range(TokenId first, int n) {
  std::vector<TokenId> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

class PrefixTrieTest : public ::testing::Test {
 protected:
  PagePool device_{Tier::Device, 1, 64};
  PagePool host_{Tier::Host, 1, 64};
  PrefixTrie trie_{device_, host_, kP};

  // Inserts tokens as a sequence would: fresh device pages, handed to the trie, then the caller's
  // references dropped. Returns the caller's page table.
  std::vector<PageId> insert(NamespaceId ns, const std::vector<TokenId>& tokens) {
    std::vector<PageId> pages;
    for (std::size_t i = 0; i < (tokens.size() + kP - 1) / kP; ++i) pages.push_back(*device_.allocate());
    { Lease lease = trie_.insert(ns, tokens, pages); }
    for (PageId p : pages) device_.release(p);
    trie_.check_invariants();
    return pages;
  }

  void TearDown() override {
    // No test may leave a page leased; everything else the trie holds is released by its destructor.
    EXPECT_EQ(trie_.leases_outstanding(), 0u);
    trie_.check_invariants();
    device_.check_invariants();
  }
};

struct MatchCase {
  const char* name;
  std::vector<std::vector<TokenId>> cached;  // inserted in order (namespace 1)
  std::vector<TokenId> query;
  std::uint32_t matched;  // token-exact
  std::uint32_t pages;    // pages returned
  std::uint32_t tail;     // tokens of the last page that must be copied on write
  std::uint32_t nodes;    // trie nodes after the inserts
};

TEST_F(PrefixTrieTest, MatchTable) {
  // clang-format off
  const std::vector<MatchCase> cases = {
      {"empty trie", {}, {1, 2, 3}, 0, 0, 0, 0},
      {"exact, page aligned", {{1, 2, 3, 4, 5, 6, 7, 8}}, {1, 2, 3, 4, 5, 6, 7, 8}, 8, 2, 0, 1},
      {"exact, partial tail", {{1, 2, 3, 4, 5, 6}}, {1, 2, 3, 4, 5, 6}, 6, 2, 2, 1},
      {"query shorter, inside a page", {{1, 2, 3, 4, 5, 6, 7, 8}}, {1, 2, 3, 4, 5}, 5, 2, 1, 1},
      {"query longer", {{1, 2, 3, 4}}, {1, 2, 3, 4, 5, 6}, 4, 1, 0, 1},
      {"diverges in the first page", {{1, 2, 3, 4}}, {1, 2, 9}, 2, 1, 2, 1},
      {"diverges at a boundary", {{1, 2, 3, 4, 5, 6, 7, 8}}, {1, 2, 3, 4, 9}, 4, 1, 0, 1},
      {"first token differs", {{1, 2, 3, 4}}, {2, 2, 3, 4}, 0, 0, 0, 1},
      {"branch picked by its first page", {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 9, 9, 9, 9}},
       {1, 2, 3, 4, 9, 9, 9, 9, 1}, 8, 2, 0, 3},
      {"sibling sharing tokens inside the first page", {{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 7, 7}},
       {1, 2, 3, 4, 5, 7, 7}, 7, 2, 3, 3},
      {"partial leaf extended in place", {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6, 7}},
       {1, 2, 3, 4, 5, 6, 7}, 7, 2, 3, 1},
      // The second insert splits [1..8] for its lease; the halves merge again once the lease ends.
      {"prefix of a cached sequence adds nothing", {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5}},
       {1, 2, 3, 4, 5, 6, 7, 8}, 8, 2, 0, 1},
  };
  // clang-format on
  for (const MatchCase& c : cases) {
    SCOPED_TRACE(c.name);
    PagePool device(Tier::Device, 1, 64), host(Tier::Host, 1, 64);
    {
      PrefixTrie trie(device, host, kP);
      for (const auto& tokens : c.cached) {
        std::vector<PageId> pages;
        for (std::size_t i = 0; i < (tokens.size() + kP - 1) / kP; ++i) pages.push_back(*device.allocate());
        { Lease lease = trie.insert(1, tokens, pages); }
        for (PageId p : pages) device.release(p);
        trie.check_invariants();
      }
      const MatchResult m = trie.match(1, c.query);
      EXPECT_EQ(m.matched_tokens, c.matched);
      EXPECT_EQ(m.pages.size(), c.pages);
      EXPECT_EQ(m.tail_tokens, c.tail);
      EXPECT_EQ(m.copy_on_write(), c.tail != 0);
      EXPECT_EQ(m.device_tokens, c.matched);
      EXPECT_EQ(trie.totals().nodes, c.nodes);
      EXPECT_EQ(trie.match(2, c.query).matched_tokens, 0u) << "another namespace saw the entries";
    }
    EXPECT_EQ(device.used_pages(), 0u) << "the trie's destructor leaked pages";
  }
}

TEST_F(PrefixTrieTest, ExactMatchReturnsPagesAndMarksPartialTailCopyOnWrite) {
  const auto tokens = range(100, 10);  // pages: 4 + 4 + 2 (partial)
  const auto pages = insert(1, tokens);
  const MatchResult full = trie_.match(1, tokens);
  EXPECT_EQ(full.matched_tokens, 10u);
  ASSERT_EQ(full.pages.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(full.pages[i], (PageRef{pages[i], Tier::Device}));
  EXPECT_EQ(full.device_tokens, 10u);
  EXPECT_EQ(full.host_tokens, 0u);
  EXPECT_EQ(full.tail_tokens, 2u);
  EXPECT_TRUE(full.copy_on_write());
  const MatchResult aligned = trie_.match(1, range(100, 8));
  EXPECT_EQ(aligned.matched_tokens, 8u);
  EXPECT_EQ(aligned.pages.size(), 2u);
  EXPECT_FALSE(aligned.copy_on_write());
  auto longer = range(100, 10);
  longer.push_back(7);
  EXPECT_EQ(trie_.match(1, longer).matched_tokens, 10u);
  EXPECT_EQ(trie_.match(1, seq({5, 6})).matched_tokens, 0u);
}

TEST_F(PrefixTrieTest, DivergenceInsideAPageReusesItsHeadCopyOnWrite) {
  const auto pages = insert(1, range(100, 12));
  auto query = range(100, 6);
  query.push_back(999);  // diverges at position 6: inside the second page
  const MatchResult m = trie_.match(1, query);
  EXPECT_EQ(m.matched_tokens, 6u);
  ASSERT_EQ(m.pages.size(), 2u);
  EXPECT_EQ(m.pages[1].page, pages[1]);  // the shared page the caller must copy before writing
  EXPECT_EQ(m.tail_tokens, 2u);
}

TEST_F(PrefixTrieTest, InsertOfADivergingSequenceSplitsAtThePageBoundary) {
  const auto a_pages = insert(1, range(100, 12));
  auto b = range(100, 6);
  b.insert(b.end(), {900, 901, 902});
  std::vector<PageId> b_pages = {*device_.allocate(), *device_.allocate(), *device_.allocate()};
  {
    Lease lease = trie_.insert(1, b, b_pages);
    trie_.check_invariants();
    EXPECT_EQ(lease.tokens(), 9u);
  }
  // root -> [100..103] -> {[104..111] of a, [104,105,900..902] of b}
  EXPECT_EQ(trie_.totals().nodes, 3u);
  // b's first page duplicates a's: the trie kept its own and took no reference on b's.
  EXPECT_EQ(device_.refcount(b_pages[0]), 1u);
  EXPECT_EQ(device_.refcount(b_pages[1]), 2u);
  const MatchResult mb = trie_.match(1, b);
  EXPECT_EQ(mb.matched_tokens, 9u);
  EXPECT_EQ(mb.pages[0].page, a_pages[0]);
  EXPECT_EQ(mb.pages[1].page, b_pages[1]);
  EXPECT_EQ(trie_.match(1, range(100, 12)).matched_tokens, 12u);
  for (PageId p : b_pages) device_.release(p);
  EXPECT_EQ(device_.refcount(b_pages[0]), 0u);  // the duplicate went back to the pool
}

TEST_F(PrefixTrieTest, NodeMergesWithItsOnlyChildOnceUnpinned) {
  insert(1, range(100, 12));
  auto b = range(100, 4);
  b.push_back(500);
  insert(1, b);
  ASSERT_EQ(trie_.totals().nodes, 3u);
  // Drop b's leaf: the split node and a's remainder are both unpinned device nodes and join again.
  TrieNode* leaf = trie_.match(1, b).last_node;
  trie_.drop(leaf);
  trie_.check_invariants();
  EXPECT_EQ(trie_.totals().nodes, 1u);
  EXPECT_EQ(trie_.match(1, range(100, 12)).matched_tokens, 12u);
}

TEST_F(PrefixTrieTest, PinnedNodesAreNeverMerged) {
  insert(1, range(100, 12));
  Lease lease = trie_.pin(1, range(100, 12), 4);  // the pin splits at 4 so it holds one page
  trie_.check_invariants();
  EXPECT_EQ(trie_.totals().nodes, 2u);
  EXPECT_EQ(trie_.totals().device_protected, 1u);
  EXPECT_EQ(trie_.totals().device_evictable, 2u);
  lease.reset();
  trie_.check_invariants();
  EXPECT_EQ(trie_.totals().nodes, 1u);  // merged back once unpinned
}

TEST_F(PrefixTrieTest, NamespacesNeverShareNodes) {
  insert(1, range(100, 8));
  EXPECT_EQ(trie_.match(2, range(100, 8)).matched_tokens, 0u);
  insert(2, range(100, 8));
  EXPECT_EQ(trie_.totals().nodes, 2u);
  EXPECT_NE(trie_.match(1, range(100, 8)).pages[0].page, trie_.match(2, range(100, 8)).pages[0].page);
}

TEST_F(PrefixTrieTest, ColdestLeafIsTheLeastRecentlyUsed) {
  insert(1, range(100, 4));
  insert(1, range(200, 4));
  insert(1, range(300, 4));
  EXPECT_EQ(trie_.coldest_device_evictable(), trie_.match(1, range(100, 4)).last_node);
  { Lease touch = trie_.pin(1, range(100, 4), 4); }  // using a prefix makes it the hottest
  EXPECT_EQ(trie_.coldest_device_evictable(), trie_.match(1, range(200, 4)).last_node);
  trie_.drop(trie_.coldest_device_evictable());
  EXPECT_EQ(trie_.coldest_device_evictable(), trie_.match(1, range(300, 4)).last_node);
}

TEST_F(PrefixTrieTest, PinnedPathIsNeverOfferedForEviction) {
  insert(1, range(100, 8));
  insert(1, range(200, 8));
  Lease lease = trie_.pin(1, range(100, 8), 8);
  trie_.check_invariants();
  while (TrieNode* victim = trie_.coldest_device_evictable()) {
    EXPECT_NE(victim, trie_.match(1, range(100, 8)).last_node);
    trie_.drop(victim);
    trie_.check_invariants();
  }
  EXPECT_EQ(trie_.match(1, range(100, 8)).matched_tokens, 8u);
  EXPECT_EQ(trie_.match(1, range(200, 8)).matched_tokens, 0u);
  EXPECT_THROW(trie_.drop(trie_.match(1, range(100, 8)).last_node), Error);
}

TEST_F(PrefixTrieTest, PartialLeafIsExtendedWithTheCallersFullerPage) {
  const auto first = insert(1, range(100, 6));  // pages: full + partial (2 tokens)
  std::vector<PageId> second = {*device_.allocate(), *device_.allocate(), *device_.allocate()};
  { Lease lease = trie_.insert(1, range(100, 9), second); }
  trie_.check_invariants();
  EXPECT_EQ(trie_.totals().nodes, 1u);
  const MatchResult m = trie_.match(1, range(100, 9));
  EXPECT_EQ(m.matched_tokens, 9u);
  ASSERT_EQ(m.pages.size(), 3u);
  EXPECT_EQ(m.pages[0].page, first[0]);   // the full page stays shared
  EXPECT_EQ(m.pages[1].page, second[1]);  // the partial page was replaced by the caller's copy
  EXPECT_EQ(m.pages[2].page, second[2]);
  EXPECT_EQ(device_.refcount(first[1]), 0u);  // the old partial page was released
  for (PageId p : second) device_.release(p);
}

TEST_F(PrefixTrieTest, SiblingsMayShareTokensInsideTheirFirstPage) {
  insert(1, range(100, 6));
  insert(1, seq({100, 101, 102, 103, 104, 999, 7}));
  // root -> [100..103] -> {[104,105], [104,999,7]}: both children start with 104.
  EXPECT_EQ(trie_.totals().nodes, 3u);
  EXPECT_EQ(trie_.match(1, range(100, 6)).matched_tokens, 6u);
  EXPECT_EQ(trie_.match(1, seq({100, 101, 102, 103, 104, 999, 7})).matched_tokens, 7u);
  EXPECT_EQ(trie_.match(1, seq({100, 101, 102, 103, 104})).matched_tokens, 5u);
}

TEST_F(PrefixTrieTest, DemoteThenPromoteMovesPagesBetweenTiers) {
  const auto tokens = range(100, 8);
  insert(1, tokens);
  TrieNode* leaf = trie_.coldest_device_evictable();
  ASSERT_NE(leaf, nullptr);
  std::vector<PageId> host_pages = {*host_.allocate(), *host_.allocate()};
  const std::vector<PageId> old_device = trie_.demote(leaf, host_pages);
  trie_.check_invariants();
  for (PageId p : old_device) device_.release(p);  // the caller's, once its copies are done
  EXPECT_EQ(device_.used_pages(), 0u);
  EXPECT_EQ(trie_.totals().host_evictable, 2u);
  const MatchResult m = trie_.match(1, tokens);
  EXPECT_EQ(m.host_tokens, 8u);
  EXPECT_EQ(m.pages[0], (PageRef{host_pages[0], Tier::Host}));

  Lease lease = trie_.pin(1, tokens, 8);
  ASSERT_EQ(trie_.host_only_pages_on_path(lease), 2u);
  std::vector<PageId> device_pages = {*device_.allocate(), *device_.allocate()};
  const auto copies = trie_.begin_promotion(lease, device_pages);
  trie_.check_invariants();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[1], (PageCopy{Tier::Host, host_pages[1], Tier::Device, device_pages[1]}));
  EXPECT_TRUE(trie_.transfers_pending());
  lease.reset();  // the transfer pin keeps the node pinned and on both tiers
  trie_.check_invariants();
  EXPECT_EQ(trie_.coldest_device_evictable(), nullptr);
  trie_.finish_transfers();
  trie_.check_invariants();
  EXPECT_EQ(host_.used_pages(), 0u);
  EXPECT_EQ(trie_.match(1, tokens).device_tokens, 8u);
}

TEST_F(PrefixTrieTest, InsertThroughAHostOnlyNodeAdoptsTheCallersDevicePages) {
  insert(1, range(100, 8));
  TrieNode* leaf = trie_.coldest_device_evictable();
  std::vector<PageId> host_pages = {*host_.allocate(), *host_.allocate()};
  for (PageId p : trie_.demote(leaf, host_pages)) device_.release(p);
  trie_.check_invariants();
  const auto pages = insert(1, range(100, 12));  // recomputed (e.g. promotion had no room) and longer
  EXPECT_EQ(host_.used_pages(), 0u);
  const MatchResult m = trie_.match(1, range(100, 12));
  EXPECT_EQ(m.device_tokens, 12u);
  EXPECT_EQ(m.pages[0].page, pages[0]);
}

TEST_F(PrefixTrieTest, SplitTailLeavesOnlyTheRequestedPagesInTheVictim) {
  insert(1, range(100, 14));  // 4 pages, the last partial
  TrieNode* victim = trie_.split_tail(trie_.coldest_device_evictable(), 1);
  trie_.check_invariants();
  EXPECT_EQ(trie_.node_pages(victim), 1u);
  const DroppedPages dropped = trie_.drop(victim);
  trie_.check_invariants();
  EXPECT_EQ(dropped.device, 1u);
  EXPECT_EQ(trie_.match(1, range(100, 14)).matched_tokens, 12u);
}

TEST_F(PrefixTrieTest, InsertWithWrongPageCountThrows) {
  std::vector<PageId> pages = {*device_.allocate()};
  EXPECT_THROW(trie_.insert(1, range(100, 5), pages), Error);
  device_.release(pages[0]);
}

}  // namespace
}  // namespace kvtrie

namespace kvtrie {
namespace {

TEST_F(PrefixTrieTest, InsertFromALeaseWhoseNodeAnotherCallerGrewAndSplitStaysOnItsOwnTokens) {
  // Regression (found by the randomized cache test): B pins 6 tokens inside A's partial leaf; A extends
  // that leaf, C's pin splits it after a page that holds A's tokens 7 and 8, so B's leased node now hangs
  // below a head spelling A's tokens. B's insert from its lease used to start at that head and file B's
  // third page under A's second page.
  auto pages = [&](std::size_t n) {
    std::vector<PageId> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(*device_.allocate());
    return out;
  };
  const auto a = seq({1, 2, 3, 4, 5, 6, 7}), a_longer = seq({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const auto b = seq({1, 2, 3, 4, 5, 6, 20, 21, 22, 23});
  const std::vector<PageId> a_pages = pages(3);
  Lease lease_a = trie_.insert(1, a, std::span(a_pages).first(2));
  Lease lease_b = trie_.pin(1, b, 6);
  Lease grown = trie_.insert(1, a_longer, a_pages, &lease_a);
  lease_a = std::move(grown);
  Lease lease_c = trie_.pin(1, seq({1, 2, 3, 4, 5, 9}), 5);  // splits A's node after 8 tokens
  trie_.check_invariants();

  const std::vector<PageId> b_pages = {a_pages[0], *device_.allocate(), *device_.allocate()};
  Lease fresh = trie_.insert(1, b, b_pages, &lease_b);
  lease_b = std::move(fresh);
  trie_.check_invariants();
  const std::vector<PageRef> path = trie_.path_pages(lease_b);
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(path[0].page, a_pages[0]);
  EXPECT_EQ(path[1].page, b_pages[1]) << "B's second page must be its own: A's holds tokens 7 and 8";
  EXPECT_EQ(path[2].page, b_pages[2]);
  EXPECT_EQ(trie_.match(1, b).matched_tokens, b.size());
  EXPECT_EQ(trie_.match(1, a_longer).matched_tokens, a_longer.size());

  for (Lease* l : {&lease_a, &lease_b, &lease_c}) l->reset();
  for (PageId p : a_pages) device_.release(p);
  for (std::size_t i = 1; i < b_pages.size(); ++i) device_.release(b_pages[i]);
}

}  // namespace
}  // namespace kvtrie
