// Contract: PageCopier is the cache's only way to move KV bytes. The cache queues batches of whole-page
// copies (device->host for demotion, host->device for promotion, device->device for copy-on-write of a
// shared partial page) and later waits for them. The Vulkan implementation (kernels side, transfer queue)
// plugs in behind this interface; RecordingPageCopier is the CPU mock for tests.
// Ordering contract an implementation must keep:
//   - a queued copy reads its source after all GPU work already submitted that writes that page;
//   - queued copies take effect in queue order (a copy may read a page an earlier queued copy writes);
//   - after wait() returns, every queued copy is complete: destinations hold the data and sources may be
//     reused.
// Called only from the cache's owner thread (the scheduler). Must outlive the KvCache that uses it.
#pragma once
#include <span>
#include <vector>

#include "cache/page_pool.h"

namespace kvtrie {

struct PageCopy {
  Tier from_tier;
  PageId from;
  Tier to_tier;
  PageId to;
  bool operator==(const PageCopy&) const = default;
};

class PageCopier {
 public:
  virtual ~PageCopier() = default;
  // Queues the copies (may start them asynchronously). An empty batch is allowed.
  virtual void copy(std::span<const PageCopy> batch) = 0;
  // Blocks until every copy queued so far is complete.
  virtual void wait() = 0;
};

// Test mock: records every batch and every wait; copies "complete" at wait() (pending() lists the rest).
class RecordingPageCopier final : public PageCopier {
 public:
  void copy(std::span<const PageCopy> batch) override {
    pending_.insert(pending_.end(), batch.begin(), batch.end());
    all_.insert(all_.end(), batch.begin(), batch.end());
    ++batches_;
  }
  void wait() override {
    completed_.insert(completed_.end(), pending_.begin(), pending_.end());
    pending_.clear();
    ++waits_;
  }
  const std::vector<PageCopy>& all() const { return all_; }
  const std::vector<PageCopy>& pending() const { return pending_; }
  const std::vector<PageCopy>& completed() const { return completed_; }
  int batches() const { return batches_; }
  int waits() const { return waits_; }

 private:
  std::vector<PageCopy> all_, pending_, completed_;
  int batches_ = 0, waits_ = 0;
};

}  // namespace kvtrie
