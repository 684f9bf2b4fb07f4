// Contract: PageCopier is the cache's only way to move KV bytes. The cache queues batches of whole-page
// copies (device->host for demotion, host->device for promotion, device->device for copy-on-write of a
// shared partial page) and later waits for them, or polls them while the GPU computes other sequences.
// The Vulkan implementation (cache/vk_page_store.h, on a transfer queue) plugs in behind this interface;
// tests use the simulated copier of tests/cache/simulated_kv.h.
// Ordering contract an implementation must keep:
//   - a queued copy reads its source after all GPU work already completed (observed by the host) that
//     writes that page;
//   - queued copies take effect in queue order (a copy may read a page an earlier queued copy writes);
//   - copy() returns the batch's ticket: 1 for the first batch, then one more per non-empty batch;
//   - completed() is the highest ticket whose batch, and every batch before it, is complete (0: none). It
//     never blocks and never decreases. Once it reaches a ticket, GPU work submitted afterwards sees that
//     batch's destinations and may overwrite its sources;
//   - after wait() returns, every queued copy is complete (completed() is the last ticket).
// Called only from the cache's owner thread (the scheduler). Must outlive the KvCache that uses it.
#pragma once
#include <cstdint>
#include <span>

#include "cache/page_pool.h"

namespace kvtrie {

struct PageCopy {
  Tier from_tier;
  PageId from;
  Tier to_tier;
  PageId to;
  bool operator==(const PageCopy&) const = default;
};

// Orders batches of copies: tickets count non-empty batches from 1; 0 means "no batch".
using CopyTicket = std::uint64_t;

class PageCopier {
 public:
  virtual ~PageCopier() = default;
  // Queues the copies and starts them; returns the batch's ticket. An empty batch queues nothing and
  // returns the last ticket.
  virtual CopyTicket copy(std::span<const PageCopy> batch) = 0;
  // The last ticket known complete, without blocking (see the contract above).
  virtual CopyTicket completed() = 0;
  // Blocks until every copy queued so far is complete.
  virtual void wait() = 0;
};

}  // namespace kvtrie
