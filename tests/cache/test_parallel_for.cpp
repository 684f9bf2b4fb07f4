// ParallelFor: every item of a run runs exactly once, on several threads at once, run after run on the
// same helpers; an item returning false stops the run (items not started are skipped); one thread works.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cache/parallel_for.h"

namespace kvtrie {
namespace {

TEST(ParallelFor, EveryItemRunsOnceInEveryRun) {
  ParallelFor pool(4);
  EXPECT_EQ(pool.threads(), 4u);
  for (std::size_t count : {0u, 1u, 3u, 4u, 37u, 200u}) {
    std::vector<std::atomic<int>> runs(count);
    pool.run(count, [&](std::size_t i) {
      runs[i].fetch_add(1);
      return true;
    });
    for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(runs[i].load(), 1) << "item " << i << " of " << count;
  }
}

TEST(ParallelFor, ItemsRunAtTheSameTime) {
  // Four slow items on four threads: at some moment more than one is running.
  ParallelFor pool(4);
  std::atomic<int> inside{0}, most{0};
  pool.run(8, [&](std::size_t) {
    const int now = inside.fetch_add(1) + 1;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    inside.fetch_sub(1);
    return true;
  });
  EXPECT_GT(most.load(), 1);
}

TEST(ParallelFor, AFailedItemStopsTheRun) {
  ParallelFor pool(3);
  std::vector<std::atomic<int>> runs(100);
  pool.run(runs.size(), [&](std::size_t i) {
    runs[i].fetch_add(1);
    // Slow items after the failing one: the other threads hold at most one each when it fails.
    if (i > 5) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return i != 5;
  });
  for (std::size_t i = 0; i <= 5; ++i) EXPECT_EQ(runs[i].load(), 1) << "items before the failure run";
  int after = 0;
  for (std::size_t i = 6; i < runs.size(); ++i) after += runs[i].load();
  // Only items already taken when item 5 failed run (one per other thread, a few more if it was slow).
  EXPECT_LT(after, 10);
  // The next run starts afresh.
  std::atomic<int> total{0};
  pool.run(10, [&](std::size_t) {
    total.fetch_add(1);
    return true;
  });
  EXPECT_EQ(total.load(), 10);
}

TEST(ParallelFor, OneThreadIsTheCallersOwn) {
  ParallelFor pool(1);
  EXPECT_EQ(pool.threads(), 1u);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::size_t> order;
  pool.run(5, [&](std::size_t i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
    return true;
  });
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace kvtrie
