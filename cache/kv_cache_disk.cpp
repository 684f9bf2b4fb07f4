// The disk tier's part of the KV cache policy (cache/kv_cache.h): what the host tier drops goes to disk, a
// prompt's pages past the cached prefix come back from it into the host tier, and a shutdown persists all.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "base/error.h"
#include "cache/kv_cache.h"
#include "cache/page_hash.h"

namespace kvtrie {

void KvCache::attach_disk_tier(DiskPageStore& disk, HostPageMemory& memory) {
  KVTRIE_CHECK(
      disk.config().page_tokens == config_.page_tokens && disk.config().page_bytes == config_.page_bytes,
      "a disk tier of another page shape");
  disk_ = &disk;
  host_memory_ = &memory;
}

void KvCache::spill_to_disk(const TrieNode* node) {
  if (disk_ == nullptr || !disk_->enabled()) return;
  // A page demoted moments ago may still be on its way to the host: read it only once the copier is done.
  // Only the copier waits here: retiring copies would change the trie under the caller's victim.
  if (!in_flight_.empty() && copier_.completed() < last_ticket_) copier_.wait();
  publish_disk_removals();  // first: a page gone and handed over again is Removed, then Stored
  KvEventSink* const sink = trie_.event_sink();
  for (const FullPage& page : trie_.full_pages(node)) {
    if (page.page.tier != Tier::Host) continue;
    if (!disk_->store(page.hash, page.tokens, host_memory_->read_host_page(page.page.page), persisting_))
      continue;
    ++stats_.disk_spilled_pages;
    // The node is still in the trie, so the parent page a router needs is held (it hangs from the node's
    // parent or an earlier page of the node).
    if (sink == nullptr || !disk_published_.insert(page.hash).second) continue;
    KvEvent event;
    event.kind = KvEvent::Kind::Stored;
    event.tier = Tier::Disk;
    event.hashes = {page.hash};
    event.parent = page.parent;
    event.tokens.assign(page.tokens.begin(), page.tokens.end());
    event.page_tokens = config_.page_tokens;
    sink->publish(std::move(event));
  }
}

void KvCache::publish_disk_removals() {
  KvEventSink* const sink = trie_.event_sink();
  KvEvent event;
  event.kind = KvEvent::Kind::Removed;
  event.tier = Tier::Disk;
  for (PageHash hash : disk_->take_removed())
    if (disk_published_.erase(hash) != 0) event.hashes.push_back(hash);
  if (sink != nullptr && !event.hashes.empty()) sink->publish(std::move(event));
}

std::unique_ptr<KvCache::DiskLoad> KvCache::prepare_disk_load(NamespaceId ns, std::span<const TokenId> usable,
                                                              GroupId group, bool last_first) {
  const std::uint32_t P = config_.page_tokens;
  publish_disk_removals();  // what the writer evicted since, and (at the finish) what a read refuses
  if (!disk_->enabled()) return nullptr;
  const std::uint32_t start = trie_.match(ns, usable).matched_tokens / P * P;
  const auto full_pages = static_cast<std::uint32_t>(usable.size() / P);
  if (start / P >= full_pages || host_.capacity() == 0) return nullptr;
  // The chain up to the cached prefix (cheap: XXH3 over 4 bytes a token), then the pages the disk holds.
  PageHash hash = namespace_page_seed(ns);
  for (std::uint32_t i = 0; i < start / P; ++i) hash = chain_page_hash(hash, usable.subspan(i * P, P));
  std::vector<PageHash> wanted;
  for (std::uint32_t i = start / P; i < full_pages; ++i) {
    hash = chain_page_hash(hash, usable.subspan(i * P, P));
    if (!disk_->contains(hash)) break;
    wanted.push_back(hash);
  }
  if (wanted.empty()) return nullptr;
  auto load = std::make_unique<DiskLoad>();
  load->ns = ns;
  load->group = group;
  // Pin the prefix the pages hang from, so making host room cannot drop it.
  load->at = trie_.pin(ns, usable, start, group);
  load->start = start;
  load->last_first = last_first;
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(wanted.size(), host_.capacity()));
  make_host_room(n);
  // Fresh pages, so no copy in flight reads or writes them; the disk tier reads the run into them with
  // several reads in flight (the checksums too) and stops at the first page it cannot load.
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::optional<PageId> page = host_.allocate();
    if (!page) break;
    load->pages.push_back(*page);
  }
  const std::size_t pages = load->pages.size();
  load->tokens.assign(usable.begin(), usable.begin() + start + pages * P);
  load->hashes.assign(wanted.begin(), wanted.begin() + static_cast<std::ptrdiff_t>(pages));
  try {
    for (std::size_t r = 0; r < pages; ++r) {
      const std::size_t i = last_first ? pages - 1 - r : r;
      load->reads.push_back({load->hashes[i],
                             std::span<const TokenId>(load->tokens).subspan(start + i * P, P),
                             host_memory_->write_host_page(load->pages[i])});
    }
  } catch (...) {
    // Committing a host chunk failed: the pages hold nothing yet, give them back before throwing.
    give_back(*load);
    throw;
  }
  return load;
}

void KvCache::give_back(DiskLoad& load) {
  for (std::size_t i = 0; i < load.pages.size(); ++i)
    if (!load.trie_holds(i)) host_.release(load.pages[i]);
  load.pages.clear();
}

DiskRun KvCache::hang_read_pages(DiskLoad& load, std::size_t first, std::size_t last) {
  KVTRIE_CHECK(!load.hung, "a disk read's pages hung twice");
  load.hung = true;
  const std::uint32_t P = config_.page_tokens;
  for (std::size_t i = first; i < last; ++i) host_memory_->host_page_written(load.pages[i]);
  // They hang below what the trie holds of the prompt now: the prefix the read started from, plus what a
  // sequence cached of the run meanwhile (computed, or read by acquire()). Pages the trie holds already are
  // given back, and so are all of them when the trie does not reach the first one read.
  const std::uint32_t held = trie_.match(load.ns, load.tokens).matched_tokens / P * P;
  const std::size_t from = std::max<std::size_t>(first, (std::max(held, load.start) - load.start) / P);
  const bool reaches = held >= load.start + first * P;
  if (first < last && (!reaches || from > first)) ++stats_.disk_loads_discarded;
  if (!reaches || from >= last) return {};
  const auto begin = static_cast<std::uint32_t>(load.start + from * P);
  const Lease at = trie_.pin(load.ns, load.tokens, begin, load.group);
  const std::span<const PageId> hung(load.pages.data() + from, last - from);
  const std::vector<PageHash> hashes =
      trie_.add_host_leaf(at, std::span<const TokenId>(load.tokens).subspan(begin, hung.size() * P), hung);
  KVTRIE_CHECK(
      std::equal(hashes.begin(), hashes.end(), load.hashes.begin() + static_cast<std::ptrdiff_t>(from)),
      "disk pages under another hash");
  stats_.disk_loaded_pages += hashes.size();
  load.hung_begin = from;  // the trie holds these pages now
  load.hung_end = last;
  return {begin, static_cast<std::uint32_t>(hung.size() * P)};
}

DiskRun KvCache::finish_disk_load(DiskLoad& load, std::size_t loaded) {
  const std::size_t n = load.pages.size();
  // The run's pages read: [first, last) of its pages, in position order.
  const std::size_t first = load.last_first ? n - loaded : 0, last = load.last_first ? n : loaded;
  const DiskRun run = load.hung ? DiskRun{} : hang_read_pages(load, first, last);  // hung early: told then
  give_back(load);
  if (loaded < load.reads.size()) publish_disk_removals();
  return run;
}

DiskRun KvCache::hang_disk_load(DiskLoadId id) {
  DiskLoad& load = disk_load(id);
  KVTRIE_CHECK(load.last_first, "hang_disk_load of a read in position order");
  load.progress.limit.store(0);  // no read starts from now on
  const std::size_t n = load.pages.size(), loaded = load.progress.loaded.load();
  return hang_read_pages(load, n - loaded, n);
}

KvCache::DiskLoad& KvCache::disk_load(DiskLoadId id) const {
  for (const auto& load : disk_loads_)
    if (load->id == id) return *load;
  throw Error("kv cache: no background disk read " + std::to_string(id));
}

std::uint32_t KvCache::disk_load_floor(DiskLoadId id) const {
  const DiskLoad& load = disk_load(id);
  KVTRIE_CHECK(load.last_first, "disk_load_floor of a read in position order");
  return load.end() - static_cast<std::uint32_t>(load.progress.loaded.load()) * config_.page_tokens;
}

void KvCache::limit_disk_load(DiskLoadId id, std::uint32_t position) {
  DiskLoad& load = disk_load(id);
  KVTRIE_CHECK(load.last_first, "limit_disk_load of a read in position order");
  // The pages that start at or past `position` are still wanted: the first reads (the last pages first).
  const std::uint32_t P = config_.page_tokens;
  const std::size_t n = load.pages.size();
  const std::uint64_t above_start = std::max(position, load.start) - load.start;  // UINT32_MAX: no page
  const std::uint64_t first_wanted = (above_start + P - 1) / P;
  const std::size_t wanted = first_wanted >= n ? 0 : n - first_wanted;
  std::size_t limit = load.progress.limit.load();
  while (wanted < limit && !load.progress.limit.compare_exchange_weak(limit, wanted)) {
  }
}

DiskRun KvCache::load_from_disk(NamespaceId ns, std::span<const TokenId> usable, GroupId group) {
  const std::unique_ptr<DiskLoad> load = prepare_disk_load(ns, usable, group, false);
  if (!load) return {};
  std::size_t loaded = 0;
  try {
    loaded = disk_->load_run(load->reads);
  } catch (...) {
    give_back(*load);
    throw;
  }
  return finish_disk_load(*load, loaded);
}

std::optional<DiskLoadId> KvCache::start_disk_load(NamespaceId ns, std::span<const TokenId> prompt,
                                                   GroupId group, bool last_first) {
  if (disk_ == nullptr || prompt.empty()) return std::nullopt;
  std::unique_ptr<DiskLoad> load = prepare_disk_load(ns, prompt.first(prompt.size() - 1), group, last_first);
  if (!load) return std::nullopt;
  load->id = next_disk_load_++;
  load->in_memory = disk_->in_memory(load->hashes);
  // The reads only touch the load's own host pages, tokens and progress, which stay put until it is
  // finished.
  DiskPageStore* const disk = disk_;
  const std::span<const DiskPageRead> reads = load->reads;
  DiskRunProgress* const progress = &load->progress;
  try {
    load->loaded =
        std::async(std::launch::async, [disk, reads, progress] { return disk->load_run(reads, progress); });
  } catch (...) {
    give_back(*load);  // no thread to read with
    throw;
  }
  const DiskLoadId id = load->id;
  disk_loads_.push_back(std::move(load));
  return id;
}

std::vector<DiskLoadDone> KvCache::poll_disk_loads(bool wait) {
  std::vector<DiskLoadDone> done;
  for (auto it = disk_loads_.begin(); it != disk_loads_.end();) {
    DiskLoad& load = **it;
    if (!wait && load.loaded.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    std::size_t loaded = 0;
    try {
      loaded = load.loaded.get();  // load_run does not throw; a thread that could not start does
    } catch (const std::exception& e) {
      spdlog::warn("kv cache: a background disk read failed: {}", e.what());
    }
    done.push_back({load.id, finish_disk_load(load, loaded)});
    it = disk_loads_.erase(it);
  }
  return done;
}

void KvCache::wait_for_disk_load(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (const auto& load : disk_loads_)
    if (load->loaded.wait_until(until) == std::future_status::ready) return;
}

std::uint32_t KvCache::persist_to_disk() {
  if (disk_ == nullptr) return 0;
  const std::uint64_t before = stats_.disk_spilled_pages;
  poll_disk_loads(true);  // background reads first: their pages hang in the trie, then go back to disk
  persisting_ = true;     // every page goes to disk: the writer's queue is waited out, not overflowed
  wait_for_copies();
  // Device pages reach the disk through the host tier: demote at most a host tier's worth at a time (a
  // larger victim would not fit and be dropped), each batch pushing the previous one on to disk.
  for (std::uint32_t free = device_.free_pages(); host_.capacity() > 0 && free < device_.capacity();) {
    make_device_room(std::min(device_.capacity(), free + host_.capacity()), 0);
    if (device_.free_pages() == free) break;  // the rest is pinned
    free = device_.free_pages();
  }
  make_host_room(host_.capacity());
  persisting_ = false;
  disk_->drain();
  publish_disk_removals();
  return static_cast<std::uint32_t>(stats_.disk_spilled_pages - before);
}

}  // namespace kvtrie
