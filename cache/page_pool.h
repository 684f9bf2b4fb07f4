// Contract: PagePool hands out fixed-size KV pages of one memory tier (device-local or host-visible) as
// indices, with a stated capacity derived from a byte budget, a free list and a reference count per page.
// It never touches memory: the kernels map a PageId to (buffer, offset); the pool only decides which pages
// are in use, so it runs with no GPU. Running out is an expected outcome: allocate() returns an empty
// optional and the caller (the cache) decides what to evict. Capacity never changes, so usage can never
// exceed the budget. Single owner thread (the scheduler's); not thread-safe. No outside object must outlive
// it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kvtrie {

// Where a page lives. Device pages are read by attention kernels; host pages only hold demoted KV. Disk has
// no pool: it names the disk tier's files (cache/disk_page_store.h) in KV events, never a PageRef.
enum class Tier : std::uint8_t { Device = 0, Host = 1, Disk = 2 };
std::string_view tier_name(Tier tier);

// A page index within one pool, in [0, capacity).
using PageId = std::uint32_t;

class PagePool {
 public:
  // capacity = budget_bytes / page_bytes (rounded down): a page never straddles the budget.
  PagePool(Tier tier, std::size_t page_bytes, std::size_t budget_bytes);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  Tier tier() const { return tier_; }
  std::size_t page_bytes() const { return page_bytes_; }
  std::size_t budget_bytes() const { return budget_bytes_; }
  std::uint32_t capacity() const { return static_cast<std::uint32_t>(refcounts_.size()); }
  std::uint32_t used_pages() const { return capacity() - free_pages(); }
  std::uint32_t free_pages() const { return static_cast<std::uint32_t>(free_.size()); }
  std::size_t used_bytes() const { return std::size_t{used_pages()} * page_bytes_; }

  // A free page with reference count 1, or nothing when every page is in use (or an injected failure).
  [[nodiscard]] std::optional<PageId> allocate();
  // Adds one reference to an allocated page (a second owner: the trie, another sequence).
  void retain(PageId page);
  // Drops one reference; the page returns to the free list when the count reaches zero.
  void release(PageId page);
  std::uint32_t refcount(PageId page) const;

  // Failure injection for tests: the Nth allocate() from now (1-based) fails as if the pool were full,
  // once. Zero disarms it.
  void fail_nth_allocation(std::uint64_t n) { fail_countdown_ = n; }
  bool injected_failure_pending() const { return fail_countdown_ != 0; }

  // Throws kvtrie::Error unless the free list and the reference counts agree.
  void check_invariants() const;

 private:
  void check_allocated(PageId page, const char* what) const;

  Tier tier_;
  std::size_t page_bytes_;
  std::size_t budget_bytes_;
  std::vector<std::uint32_t> refcounts_;  // per page; 0 = free
  std::vector<PageId> free_;              // LIFO: recently freed pages are reused first (warm in caches)
  std::uint64_t fail_countdown_ = 0;
};

}  // namespace kvtrie
