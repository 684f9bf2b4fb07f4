#include "cache/page_pool.h"

#include <string>

#include "base/error.h"

namespace kvtrie {

std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::Device:
      return "device";
    case Tier::Host:
      return "host";
    case Tier::Disk:
      return "disk";
  }
  return "?";
}

PagePool::PagePool(Tier tier, std::size_t page_bytes, std::size_t budget_bytes)
    : tier_(tier), page_bytes_(page_bytes), budget_bytes_(budget_bytes) {
  KVTRIE_CHECK(page_bytes > 0, "a KV page holds at least one byte");
  const std::size_t pages = budget_bytes / page_bytes;
  KVTRIE_CHECK(pages <= UINT32_MAX, "page count overflows PageId");
  refcounts_.assign(pages, 0);
  free_.reserve(pages);
  // Push in reverse so that the first allocations return 0, 1, 2...: predictable in tests and logs.
  for (std::size_t i = pages; i > 0; --i) free_.push_back(static_cast<PageId>(i - 1));
}

std::optional<PageId> PagePool::allocate() {
  if (fail_countdown_ > 0 && --fail_countdown_ == 0) return std::nullopt;
  if (free_.empty()) return std::nullopt;
  const PageId page = free_.back();
  free_.pop_back();
  refcounts_[page] = 1;
  return page;
}

void PagePool::check_allocated(PageId page, const char* what) const {
  KVTRIE_CHECK(page < refcounts_.size(),
               std::string(what) + ": page out of range in the " + std::string(tier_name(tier_)) + " pool");
  KVTRIE_CHECK(refcounts_[page] > 0, std::string(what) + ": page " + std::to_string(page) +
                                         " is free in the " + std::string(tier_name(tier_)) + " pool");
}

void PagePool::retain(PageId page) {
  check_allocated(page, "retain");
  ++refcounts_[page];
}

void PagePool::release(PageId page) {
  check_allocated(page, "release");
  if (--refcounts_[page] == 0) free_.push_back(page);
}

std::uint32_t PagePool::refcount(PageId page) const {
  KVTRIE_CHECK(page < refcounts_.size(), "refcount: page out of range");
  return refcounts_[page];
}

void PagePool::check_invariants() const {
  std::vector<bool> on_free_list(refcounts_.size(), false);
  for (PageId page : free_) {
    KVTRIE_CHECK(page < refcounts_.size(), "free list holds an out-of-range page");
    KVTRIE_CHECK(!on_free_list[page], "page " + std::to_string(page) + " is twice on the free list");
    KVTRIE_CHECK(refcounts_[page] == 0,
                 "page " + std::to_string(page) + " is referenced and on the free list");
    on_free_list[page] = true;
  }
  for (std::size_t page = 0; page < refcounts_.size(); ++page)
    KVTRIE_CHECK(on_free_list[page] || refcounts_[page] > 0,
                 "page " + std::to_string(page) + " is neither referenced nor free (leaked)");
  KVTRIE_CHECK(used_bytes() <= budget_bytes_, "pool usage exceeds its budget");
}

}  // namespace kvtrie
