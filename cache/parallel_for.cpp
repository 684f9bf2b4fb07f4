#include "cache/parallel_for.h"

#include <algorithm>

namespace kvtrie {

ParallelFor::ParallelFor(std::uint32_t threads) {
  for (std::uint32_t i = 1; i < std::max<std::uint32_t>(threads, 1); ++i)
    helpers_.emplace_back([this] { helper_loop(); });
}

ParallelFor::~ParallelFor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void ParallelFor::work() {
  for (std::size_t i = next_.fetch_add(1); i < count_ && !stop_run_.load(); i = next_.fetch_add(1))
    if (!(*item_)(i)) stop_run_.store(true);
}

void ParallelFor::run(std::size_t count, const std::function<bool(std::size_t)>& item) {
  if (count == 0) return;
  {
    std::lock_guard lock(mutex_);
    item_ = &item;
    count_ = count;
    next_.store(0);
    stop_run_.store(false);
    ++generation_;
  }
  job_ready_.notify_all();
  work();
  std::unique_lock lock(mutex_);
  // Every item is taken; wait for the helpers still running one, then close the run so that a helper
  // waking late finds nothing to do.
  job_done_.wait(lock, [&] { return busy_ == 0; });
  item_ = nullptr;
  count_ = 0;
}

void ParallelFor::helper_loop() {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    job_ready_.wait(lock, [&] { return stopping_ || (item_ != nullptr && generation_ != seen); });
    if (stopping_) return;
    seen = generation_;
    ++busy_;
    lock.unlock();
    work();
    lock.lock();
    --busy_;
    job_done_.notify_all();
  }
}

}  // namespace kvtrie
