// PagePool: capacity from the byte budget, allocation until full, reference counting, the free list,
// failure injection, and the invariant audit.
#include <gtest/gtest.h>

#include <set>

#include "base/error.h"
#include "cache/page_pool.h"

namespace kvtrie {
namespace {

TEST(PagePool, CapacityIsWholePagesOfTheBudget) {
  const PagePool pool(Tier::Device, 1000, 7999);  // 7.999 pages: the partial page is not usable
  EXPECT_EQ(pool.capacity(), 7u);
  EXPECT_EQ(pool.free_pages(), 7u);
  EXPECT_EQ(pool.used_bytes(), 0u);
  EXPECT_EQ(PagePool(Tier::Host, 1000, 999).capacity(), 0u);
}

TEST(PagePool, AllocatesDistinctPagesUntilFullThenReturnsNothing) {
  PagePool pool(Tier::Device, 64, 64 * 5);
  std::set<PageId> seen;
  for (int i = 0; i < 5; ++i) {
    const auto page = pool.allocate();
    ASSERT_TRUE(page.has_value());
    EXPECT_TRUE(seen.insert(*page).second) << "page " << *page << " handed out twice";
    EXPECT_EQ(pool.refcount(*page), 1u);
    pool.check_invariants();
  }
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.used_bytes(), 64u * 5);
  EXPECT_LE(pool.used_bytes(), pool.budget_bytes());
}

TEST(PagePool, PageReturnsToFreeListWhenLastReferenceDrops) {
  PagePool pool(Tier::Host, 16, 16 * 2);
  const PageId a = *pool.allocate();
  pool.retain(a);
  EXPECT_EQ(pool.refcount(a), 2u);
  pool.release(a);
  EXPECT_EQ(pool.free_pages(), 1u);  // still referenced once
  pool.release(a);
  EXPECT_EQ(pool.free_pages(), 2u);
  EXPECT_EQ(pool.refcount(a), 0u);
  pool.check_invariants();
  EXPECT_EQ(*pool.allocate(), a);  // LIFO reuse
}

TEST(PagePool, ReleaseOrRetainOfAFreePageThrows) {
  PagePool pool(Tier::Device, 16, 16 * 2);
  const PageId a = *pool.allocate();
  pool.release(a);
  EXPECT_THROW(pool.release(a), Error);
  EXPECT_THROW(pool.retain(a), Error);
  EXPECT_THROW(pool.retain(99), Error);
  pool.check_invariants();
}

TEST(PagePool, InjectedFailureHitsExactlyTheNthAllocation) {
  for (std::uint64_t n = 1; n <= 4; ++n) {
    PagePool pool(Tier::Device, 8, 8 * 8);
    pool.fail_nth_allocation(n);
    for (std::uint64_t i = 1; i <= 5; ++i)
      EXPECT_EQ(pool.allocate().has_value(), i != n) << "n=" << n << " i=" << i;
    EXPECT_EQ(pool.used_pages(), 4u);
    pool.check_invariants();
  }
}

}  // namespace
}  // namespace kvtrie
