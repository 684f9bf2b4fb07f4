// Policy of the KV cache: what to reuse on acquire, when to promote, demote, drop and copy on write.
// The trie keeps structure and references; the pools keep capacity; this file decides.
#include "cache/kv_cache.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "base/error.h"

namespace kvtrie {
namespace {

// Allocates n pages or none: a partial batch is handed back, so a failure leaks nothing.
std::optional<std::vector<PageId>> allocate_all(PagePool& pool, std::uint32_t n) {
  std::vector<PageId> pages;
  pages.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::optional<PageId> page = pool.allocate();
    if (!page) {
      for (PageId p : pages) pool.release(p);
      return std::nullopt;
    }
    pages.push_back(*page);
  }
  return pages;
}

}  // namespace

KvCache::KvCache(const KvCacheConfig& config, PageCopier& copier)
    : config_(config),
      copier_(copier),
      device_(Tier::Device, config.page_bytes, config.device_budget_bytes),
      host_(Tier::Host, config.page_bytes, config.host_budget_bytes),
      trie_(device_, host_, config.page_tokens) {}

KvCache::~KvCache() {
  // Background disk reads write into host pages whose memory the owner frees after us.
  for (const auto& load : disk_loads_) {
    load->loaded.wait();
    give_back(*load);
  }
  disk_loads_.clear();
  if (in_flight_.empty()) return;
  // The copier may still be writing pages whose memory its owner frees after us.
  try {
    copier_.wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtrie: waiting for KV page copies at shutdown failed: %s\n", e.what());
  }
}

KvCache::Sequence& KvCache::sequence(SeqId seq) {
  auto it = sequences_.find(static_cast<std::uint64_t>(seq));
  KVTRIE_CHECK(it != sequences_.end(), "unknown sequence " + std::to_string(static_cast<std::uint64_t>(seq)));
  return it->second;
}

const KvCache::Sequence& KvCache::sequence(SeqId seq) const {
  auto it = sequences_.find(static_cast<std::uint64_t>(seq));
  KVTRIE_CHECK(it != sequences_.end(), "unknown sequence " + std::to_string(static_cast<std::uint64_t>(seq)));
  return it->second;
}

AcquireResult KvCache::acquire(NamespaceId ns, std::span<const TokenId> prompt, GroupId group,
                               DiskRun from_disk, bool read_disk) {
  KVTRIE_CHECK(!prompt.empty(), "acquire of an empty prompt");
  const std::uint32_t P = config_.page_tokens;
  // The last prompt token is always computed: its logits are needed to sample.
  const auto usable = prompt.first(prompt.size() - 1);
  // Pages read from disk become a host-only node at the end of the cached prefix: the match ends with them.
  // A background read (from_disk) hung its run earlier; what this call reads follows the match as it is.
  if (disk_ != nullptr && read_disk) {
    if (const DiskRun read_now = load_from_disk(ns, usable, group); read_now.tokens > 0) from_disk = read_now;
  }
  const MatchResult match = trie_.match(ns, usable);
  Sequence s;
  s.ns = ns;
  s.group = group;
  std::uint32_t reuse = match.matched_tokens;
  s.lease = trie_.pin(ns, usable, reuse, group);

  bool promoted = false;
  if (const std::uint32_t host_pages = trie_.host_only_pages_on_path(s.lease); host_pages > 0) {
    std::optional<std::vector<PageId>> fresh;
    if (make_device_room(host_pages, group)) fresh = allocate_all(device_, host_pages);
    if (fresh) {
      queue(trie_.begin_promotion(s.lease, *fresh));
      stats_.promoted_pages += host_pages;
      promoted = true;
    } else {
      // Recomputing the host part is the only option left; the device part is still reused.
      ++stats_.failed_promotions;
      reuse = std::min(reuse, trie_.device_tokens_on_path(s.lease));
      Lease narrower = trie_.pin(ns, usable, reuse, group);
      s.lease = std::move(narrower);
    }
  }

  const std::vector<PageRef> path = trie_.path_pages(s.lease);
  const std::uint32_t table_pages = (reuse + P - 1) / P;
  KVTRIE_CHECK(path.size() >= table_pages, "pinned path shorter than the reused prefix");
  for (std::uint32_t i = 0; i < table_pages; ++i) {
    KVTRIE_CHECK(path[i].tier == Tier::Device, "reused page not resident on device");
    device_.retain(path[i].page);
    s.pages.push_back(path[i].page);
  }
  bool cow = false;
  if (reuse % P != 0) {
    // The next token lands inside a page the trie shares: give the sequence its own copy.
    std::optional<PageId> own;
    if (make_device_room(1, group)) own = device_.allocate();
    const PageId shared = s.pages.back();
    if (own) {
      queue({PageCopy{Tier::Device, shared, Tier::Device, *own}});
      s.pages.back() = *own;
      ++stats_.cow_pages;
      cow = true;
      // The trie may replace its partial page by a fuller one while the copy reads it: hold the source.
      copy_sources_.push_back(shared);
    } else {
      s.pages.pop_back();
      reuse = reuse / P * P;
      device_.release(shared);
    }
  }
  s.tokens.assign(prompt.begin(), prompt.begin() + reuse);
  // Conservative: besides its own copies, its path may hold pages an earlier promotion is still filling.
  if (!in_flight_.empty()) s.ready_at = last_ticket_;

  AcquireResult result;
  result.cached_tokens = reuse;
  result.device_hit_tokens = promoted ? std::min(reuse, match.device_tokens) : reuse;
  // Disk hits: the reused tokens of the run read from disk that were still host pages here.
  const std::uint32_t disk_end = std::min(reuse, from_disk.start + from_disk.tokens);
  result.disk_hit_tokens = disk_end > from_disk.start ? disk_end - from_disk.start : 0;
  result.disk_hit_tokens = std::min(result.disk_hit_tokens, reuse - result.device_hit_tokens);
  result.host_hit_tokens = reuse - result.device_hit_tokens - result.disk_hit_tokens;
  result.copied_on_write = cow;
  stats_.hit_tokens_device += result.device_hit_tokens;
  stats_.hit_tokens_host += result.host_hit_tokens;
  stats_.hit_tokens_disk += result.disk_hit_tokens;
  stats_.miss_tokens += prompt.size() - reuse;
  result.seq = SeqId{next_seq_++};
  sequences_.emplace(static_cast<std::uint64_t>(result.seq), std::move(s));
  return result;
}

ReserveStatus KvCache::reserve(SeqId seq, std::uint32_t total_tokens) {
  Sequence& s = sequence(seq);
  const std::uint32_t P = config_.page_tokens;
  const std::uint32_t needed = (total_tokens + P - 1) / P;
  if (needed <= s.pages.size()) return ReserveStatus::Ok;
  const auto missing = static_cast<std::uint32_t>(needed - s.pages.size());
  if (!make_device_room(missing, s.group)) return ReserveStatus::NoRoom;
  std::optional<std::vector<PageId>> fresh = allocate_all(device_, missing);
  if (!fresh) return ReserveStatus::NoRoom;
  s.pages.insert(s.pages.end(), fresh->begin(), fresh->end());
  return ReserveStatus::Ok;
}

void KvCache::commit(SeqId seq, std::span<const TokenId> tokens) {
  Sequence& s = sequence(seq);
  const std::uint32_t P = config_.page_tokens;
  const std::size_t total = s.tokens.size() + tokens.size();
  KVTRIE_CHECK((total + P - 1) / P <= s.pages.size(), "commit of tokens beyond the reserved pages");
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  const std::span<const PageId> pages(s.pages.data(), (total + P - 1) / P);
  // Pin the new path before unpinning the old one, so nothing of it is evictable in between.
  Lease fresh = trie_.insert(s.ns, s.tokens, pages, &s.lease);
  s.lease = std::move(fresh);
  if (in_flight_.empty()) share_cached_pages(s);
}

void KvCache::share_cached_pages(Sequence& s) {
  const std::size_t full = s.tokens.size() / config_.page_tokens;
  if (full <= s.checked_pages) return;  // once per page boundary: the path walk is O(pages)
  // The lease covers the committed tokens' full pages: path[i] holds exactly the tokens of table entry i.
  const std::vector<PageRef> path = trie_.path_pages(s.lease);
  for (std::size_t i = s.checked_pages; i < std::min(full, path.size()); ++i) {
    if (path[i].tier != Tier::Device || path[i].page == s.pages[i]) continue;
    device_.retain(path[i].page);
    device_.release(s.pages[i]);
    s.pages[i] = path[i].page;
  }
  s.checked_pages = std::min(full, path.size());
}

void KvCache::release(SeqId seq) {
  Sequence& s = sequence(seq);
  if (in_flight_.empty()) {
    drop_sequence(s);
  } else {
    // Its copy-on-write copy may still be reading a pinned page or writing one of its pages: keep both
    // until the copy is done, or a new owner could write a page the copier then overwrites.
    retired_.push_back(std::move(s));
  }
  sequences_.erase(static_cast<std::uint64_t>(seq));
}

void KvCache::drop_sequence(Sequence& s) {
  for (PageId page : s.pages) device_.release(page);
  s.pages.clear();
  s.lease.reset();
}

bool KvCache::ready(SeqId seq) const {
  return sequence(seq).ready_at <= copier_.completed();
}

void KvCache::poll() {
  if (!in_flight_.empty() && copier_.completed() >= last_ticket_) retire_copies();
}

void KvCache::sync() {
  wait_for_copies();
}

void KvCache::wait_for_copies() {
  if (in_flight_.empty()) return;
  copier_.wait();
  retire_copies();
}

void KvCache::retire_copies() {
  in_flight_.clear();
  for (PageId page : copy_sources_) device_.release(page);
  copy_sources_.clear();
  trie_.finish_transfers();
  for (Sequence& s : retired_) drop_sequence(s);
  retired_.clear();
}

std::span<const PageId> KvCache::page_table(SeqId seq) const {
  return sequence(seq).pages;
}

std::span<const TokenId> KvCache::committed_tokens(SeqId seq) const {
  return sequence(seq).tokens;
}

void KvCache::queue(std::vector<PageCopy> copies) {
  if (copies.empty()) return;
  stats_.copy_bytes += copies.size() * config_.page_bytes;
  in_flight_.insert(in_flight_.end(), copies.begin(), copies.end());
  last_ticket_ = copier_.copy(copies);
}

bool KvCache::make_host_room(std::uint32_t pages) {
  while (host_.free_pages() < pages) {
    TrieNode* victim = trie_.coldest_host_evictable();
    if (victim == nullptr) return false;
    const std::uint32_t want = pages - host_.free_pages();
    victim = trie_.split_tail(victim, std::min(want, trie_.node_pages(victim)));
    spill_to_disk(victim);
    stats_.evicted_host_pages += trie_.drop(victim).host;
  }
  return true;
}

TrieNode* KvCache::device_victim(std::uint32_t pages, GroupId group) const {
  const double share = config_.group_device_share;
  if (group != 0 && share < 1.0 &&
      trie_.group_device_pages(group) + pages > share * static_cast<double>(device_.capacity())) {
    if (TrieNode* own = trie_.coldest_device_evictable(group)) return own;
  }
  return trie_.coldest_device_evictable();
}

bool KvCache::make_device_room(std::uint32_t pages, GroupId group) {
  if (device_.capacity() < pages) return false;
  // Demoted pages are copied before they are reused: collect them, copy in one batch, wait once.
  std::vector<PageId> retiring;
  std::vector<PageCopy> copies;
  while (device_.free_pages() + retiring.size() < pages) {
    TrieNode* victim = device_victim(pages, group);
    if (victim == nullptr) break;
    const auto want = static_cast<std::uint32_t>(pages - device_.free_pages() - retiring.size());
    victim = trie_.split_tail(victim, std::min(want, trie_.node_pages(victim)));
    const std::uint32_t n = trie_.node_pages(victim);
    // Every unlocked host-only page can be dropped (leaves first), so this predicts make_host_room.
    const bool host_fits = host_.free_pages() + trie_.totals().host_droppable >= n;
    if (host_fits && host_.free_pages() < n) {
      // Dropping host leaves can merge the victim into its parent: choose again afterwards.
      make_host_room(n);
      continue;
    }
    if (host_fits) {
      if (std::optional<std::vector<PageId>> host_pages = allocate_all(host_, n)) {
        std::vector<PageId> device_pages = trie_.demote(victim, *host_pages);  // victim may be merged away
        for (std::uint32_t i = 0; i < n; ++i)
          copies.push_back({Tier::Device, device_pages[i], Tier::Host, (*host_pages)[i]});
        retiring.insert(retiring.end(), device_pages.begin(), device_pages.end());
        stats_.demoted_pages += n;
        continue;
      }
    }
    const DroppedPages dropped = trie_.drop(victim);
    stats_.evicted_device_pages += dropped.device;
    stats_.evicted_host_pages += dropped.host;
  }
  if (!copies.empty()) {
    queue(std::move(copies));
    wait_for_copies();  // also completes promotions in flight and frees retired sequences
  }
  for (PageId page : retiring) device_.release(page);
  if (device_.free_pages() < pages && !in_flight_.empty()) {
    // Pages still held for copies in flight (sources, sequences released meanwhile, promotions' pins)
    // come free once they complete: wait, then try again.
    wait_for_copies();
    return make_device_room(pages, group);
  }
  return device_.free_pages() >= pages;
}

std::uint32_t KvCache::flush() {
  wait_for_copies();  // resolves promotions, so no node is left pinned only by a transfer
  // With no sequence pinning anything the flush empties the cache: one Cleared event says so instead of a
  // removal per page.
  KvEventSink* const sink = trie_.event_sink();
  const bool empties = sink != nullptr && trie_.leases_outstanding() == 0;
  if (empties) trie_.set_event_sink(nullptr);
  std::uint32_t dropped = 0;
  while (TrieNode* victim = trie_.coldest_host_evictable()) {
    const DroppedPages d = trie_.drop(victim);
    stats_.evicted_host_pages += d.host;
    dropped += d.host;
  }
  // Dropping a device leaf can make its parent a leaf: repeat until only pinned nodes are left.
  while (TrieNode* victim = trie_.coldest_device_evictable()) {
    const DroppedPages d = trie_.drop(victim);
    stats_.evicted_device_pages += d.device;
    stats_.evicted_host_pages += d.host;
    dropped += d.device + d.host;
  }
  if (empties) {
    trie_.set_event_sink(sink);
    disk_published_.clear();   // a router forgets the disk pages too (they stay on disk)
    sink->publish(KvEvent{});  // Kind::Cleared
  }
  return dropped;
}

KvCache::ReusePreview KvCache::preview_acquire(NamespaceId ns, std::span<const TokenId> tokens) const {
  if (tokens.empty()) return {};
  const MatchResult m = trie_.match(ns, tokens.first(tokens.size() - 1));  // as acquire() matches
  return {m.device_tokens, m.host_tokens, m.unpinned_device_pages};
}

std::uint32_t KvCache::reclaimable_device_pages() const {
  // Pinned pages include every node mid-promotion; all other cached device pages are in unlocked nodes,
  // whose descendants are unlocked too, so evicting leaves first reaches all of them.
  const TrieTotals& t = trie_.totals();
  return device_.free_pages() + t.device_pages - t.device_protected;
}

KvCacheStats KvCache::stats() const {
  KvCacheStats s = stats_;
  s.device_pages_used = device_.used_pages();
  s.device_pages_capacity = device_.capacity();
  s.host_pages_used = host_.used_pages();
  s.host_pages_capacity = host_.capacity();
  s.device_bytes_used = device_.used_bytes();
  s.device_bytes_budget = device_.budget_bytes();
  s.host_bytes_used = host_.used_bytes();
  s.host_bytes_budget = host_.budget_bytes();
  const TrieTotals& t = trie_.totals();
  s.trie_nodes = t.nodes;
  s.device_pages_cached = t.device_pages;
  s.host_pages_cached = t.host_pages;
  s.device_pages_evictable = t.device_evictable;
  s.device_pages_pinned = t.device_protected;
  s.sequences = static_cast<std::uint32_t>(sequences_.size());
  return s;
}

void KvCache::check_invariants() const {
  trie_.check_invariants();
  device_.check_invariants();
  host_.check_invariants();
  std::vector<std::uint32_t> device_refs(device_.capacity(), 0), host_refs(host_.capacity(), 0);
  trie_.count_page_refs(Tier::Device, device_refs);
  trie_.count_page_refs(Tier::Host, host_refs);
  const std::vector<bool> pinned = trie_.pinned_device_pages();
  for (const auto& [id, s] : sequences_) {
    KVTRIE_CHECK(!s.lease.empty(), "a running sequence holds no lease");
    KVTRIE_CHECK(s.pages.size() * config_.page_tokens >= s.tokens.size(), "committed tokens without pages");
    for (PageId page : s.pages) {
      KVTRIE_CHECK(page < device_.capacity(), "page table entry out of range");
      KVTRIE_CHECK(device_refs[page] == 0 || pinned[page],
                   "a page table holds a cached page that is not pinned");
    }
  }
  for (const auto& [id, s] : sequences_)
    for (PageId page : s.pages) ++device_refs[page];
  for (const Sequence& s : retired_)
    for (PageId page : s.pages) ++device_refs[page];
  for (PageId page : copy_sources_) ++device_refs[page];
  for (const auto& load : disk_loads_)
    for (std::size_t i = 0; i < load->pages.size(); ++i)
      if (!load->trie_holds(i)) ++host_refs[load->pages[i]];
  KVTRIE_CHECK(!in_flight_.empty() || copy_sources_.empty(), "a copy source is held with no copy in flight");
  KVTRIE_CHECK(!in_flight_.empty() || retired_.empty(),
               "a retired sequence outlived the copies it waited for");
  for (const PageCopy& c : in_flight_) {
    const PagePool& from = c.from_tier == Tier::Device ? device_ : host_;
    const PagePool& to = c.to_tier == Tier::Device ? device_ : host_;
    KVTRIE_CHECK(from.refcount(c.from) > 0 && to.refcount(c.to) > 0, "a page of a copy in flight was freed");
  }
  for (PageId page = 0; page < device_.capacity(); ++page)
    KVTRIE_CHECK(device_refs[page] == device_.refcount(page),
                 "device page " + std::to_string(page) + " refcount differs from trie + page tables");
  for (PageId page = 0; page < host_.capacity(); ++page)
    KVTRIE_CHECK(host_refs[page] == host_.refcount(page),
                 "host page " + std::to_string(page) + " refcount differs from the trie's references");
  const TrieTotals& t = trie_.totals();
  KVTRIE_CHECK(t.device_pages <= device_.used_pages() && t.host_pages <= host_.used_pages(),
               "the trie stores more pages than the pools hold");
}

}  // namespace kvtrie
