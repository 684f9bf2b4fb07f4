// Test support for the cache tests: a PageCopier that moves simulated page contents, so tests can check
// that every reused position holds the KV its prefix should have (through sharing, copy-on-write,
// demotion and promotion). A page slot holds a 64-bit "KV value": a hash of the namespace and all tokens
// up to that position, so reusing a page of another prefix or namespace is caught. Copies take effect in
// order, a batch at a time, at wait() or when the test completes the oldest batch (complete_oldest(), the
// GPU finishing while the scheduler runs other sequences), like a real transfer queue; reading before then
// sees stale data. It is also the host tier's memory for the disk tier (HostPageMemory): a host page's bytes
// are its P values, so a cache using it needs page_bytes == P * 8.
#pragma once
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "cache/host_page_memory.h"
#include "cache/page_copier.h"

namespace kvtrie::test {

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

// KV value of every position of tokens in namespace ns.
inline std::vector<std::uint64_t> kv_values(std::uint64_t ns, std::span<const std::int32_t> tokens) {
  std::vector<std::uint64_t> values;
  std::uint64_t h = mix(0x1234, ns);
  for (std::int32_t t : tokens) {
    h = mix(h, static_cast<std::uint64_t>(static_cast<std::uint32_t>(t)));
    values.push_back(h);
  }
  return values;
}

class SimulatedCopier final : public PageCopier, public HostPageMemory {
 public:
  SimulatedCopier(std::uint32_t page_tokens, std::uint32_t device_pages, std::uint32_t host_pages)
      : page_tokens_(page_tokens),
        device_(device_pages, std::vector<std::uint64_t>(page_tokens, 0)),
        host_(host_pages, std::vector<std::uint64_t>(page_tokens, 0)) {}

  CopyTicket copy(std::span<const PageCopy> batch) override {
    if (batch.empty()) return queued_;
    pending_.emplace_back(batch.begin(), batch.end());
    log_.insert(log_.end(), batch.begin(), batch.end());
    return ++queued_;
  }
  CopyTicket completed() override { return queued_ - pending_.size(); }
  void wait() override {
    while (complete_oldest()) {
    }
    ++waits_;
  }
  // The oldest queued batch takes effect; false when none is queued.
  bool complete_oldest() {
    if (pending_.empty()) return false;
    for (const PageCopy& c : pending_.front()) memory(c.to_tier)[c.to] = memory(c.from_tier)[c.from];
    pending_.erase(pending_.begin());
    return true;
  }

  std::span<const std::byte> read_host_page(PageId page) override {
    return std::as_bytes(std::span(host_.at(page)));
  }
  std::span<std::byte> write_host_page(PageId page) override {
    if (host_writes_left_ == 0) throw std::runtime_error("simulated: a host chunk could not be committed");
    if (host_writes_left_ > 0) --host_writes_left_;
    return std::as_writable_bytes(std::span(host_.at(page)));
  }
  // write_host_page() succeeds `calls` more times, then throws (as committing a host chunk that the system
  // refuses does); -1: always succeeds.
  void fail_host_writes_after(int calls) { host_writes_left_ = calls; }
  void host_page_written(PageId) override {}

  // The model "computes" positions [from, to) of a sequence: writes their KV values into its pages.
  void write(std::span<const PageId> table, std::span<const std::uint64_t> values, std::size_t from,
             std::size_t to) {
    for (std::size_t pos = from; pos < to; ++pos)
      device_[table[pos / page_tokens_]][pos % page_tokens_] = values[pos];
  }
  // Number of positions in [0, n) whose page holds a wrong value (0 when the reuse is correct).
  std::size_t wrong_positions(std::span<const PageId> table, std::span<const std::uint64_t> values,
                              std::size_t n) const {
    std::size_t wrong = 0;
    for (std::size_t pos = 0; pos < n; ++pos)
      if (device_[table[pos / page_tokens_]][pos % page_tokens_] != values[pos]) ++wrong;
    return wrong;
  }

  const std::vector<PageCopy>& log() const { return log_; }
  std::size_t pending() const {
    std::size_t n = 0;
    for (const auto& batch : pending_) n += batch.size();
    return n;
  }
  int waits() const { return waits_; }
  std::size_t count(Tier from, Tier to) const {
    std::size_t n = 0;
    for (const PageCopy& c : log_) n += c.from_tier == from && c.to_tier == to;
    return n;
  }

 private:
  std::vector<std::vector<std::uint64_t>>& memory(Tier tier) {
    return tier == Tier::Device ? device_ : host_;
  }

  std::uint32_t page_tokens_;
  std::vector<std::vector<std::uint64_t>> device_, host_;
  std::vector<std::vector<PageCopy>> pending_;  // queued batches, oldest first
  std::vector<PageCopy> log_;
  CopyTicket queued_ = 0;
  int waits_ = 0;
  int host_writes_left_ = -1;  // fail_host_writes_after()
};

}  // namespace kvtrie::test
