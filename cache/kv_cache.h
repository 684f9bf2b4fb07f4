// Contract: KvCache is the façade the scheduler calls. It owns the device and host page pools and the
// prefix trie, borrows a PageCopier, and holds the state of every running sequence: its pinned prefix
// (a Lease), its page table and its references. It applies the policy: under device pressure the coldest
// device-evictable pages are demoted to host (host pressure first drops the coldest host-only leaves; a
// cold node is dropped outright when the host tier cannot take it); a match that hits host pages promotes
// them back in one batch of copies. Budgets are never exceeded: pools have fixed capacities.
// Group share: a sequence may belong to a group (a tenant). With a share below 1, room made for a sequence
// whose group's cached device pages plus the pages it asks for exceed share x device capacity is taken from
// that group's own coldest device-evictable pages first, and from the global LRU only when it has none left
// (its pinned working set alone is over the share), so one group cannot push the others' prefixes out of the
// device tier while it has cold pages of its own.
//
// Sequence lifecycle (scheduler):
//   acquire(ns, prompt, g)   -> reuse of the longest cached prefix (at most prompt.size() - 1 tokens, so at
//                               least one token is computed); page table holds the reused pages
//   ready(seq) or sync()     -> before the first forward pass that reads the page table, its promotion
//                               and copy-on-write copies must be complete: ready() says so without
//                               blocking (the scheduler runs other sequences meanwhile), sync() waits
//   reserve(seq, n)          -> page table covers positions [0, n); may evict, demote, or fail
//   (run the model: write KV of positions [cached, n) into page_table(seq))
//   commit(seq, tokens)      -> those tokens' KV is written: cache them (callable after each step)
//   release(seq)             -> unpin; committed tokens stay cached (a cancelled request keeps its prefix)
// Writes: a sequence writes only positions at or after its committed length. No other sequence writes
// those positions' pages: a reused partial page is copied on acquire, and the trie shares only the
// committed head of a page its creator is still filling. So sharing needs no further copies.
//
// Copies in flight: a page that is the source or destination of a queued copy is never freed before the
// copy completes (a sequence released meanwhile keeps its pages and pins until poll() or sync() sees every
// copy complete), so pages handed out by reserve() may be written at once. A sequence acquired while copies
// are in flight is ready only once all of them are complete: its path may share pages a promotion is still
// filling. Demotions complete before reserve() returns (their device pages are reused at once).
// Reference rule: each pool page's refcount = (1 if the trie stores it) + (number of page tables holding
// it, including released sequences waiting for copies) + (number of copy-on-write copies in flight reading
// it: the trie may swap a partial page for a fuller one meanwhile). check_invariants() verifies it together
// with the trie's and pools' invariants, and that every page of a page table that the trie stores is pinned
// (so eviction never takes a page in use). Events: an attached KvEventSink hears of every full page that
// enters or leaves a tier (cache/kv_event_sink.h); a flush that empties the cache says so with one Cleared.
// Disk tier (attach_disk_tier): the full pages of a host-only node the host tier drops are queued to the
// DiskPageStore first (a partial last page is lost), and acquire() looks up the prompt's pages past the
// cached prefix there, page by page in hash order, reads the ones it finds into fresh host pages (through
// HostPageMemory, several reads in flight on the disk tier's readers while this thread waits; the run ends
// at the first page that fails to load, and the pages past it are given back) and hangs them in the trie as a
// host-only node, which the usual promotion then copies to the device. The scheduler reads them in the
// background instead (start_disk_load): the same pages, read on a thread of their own while the owner thread
// runs steps, hung in the trie by poll_disk_loads(); acquire() then finds them as host pages and is told the
// run was read from disk. Read the last page first, the run meets a sequence computing its first pages: the
// read starts no page below where the computing will be (limit_disk_load), and what it read hangs after
// what the sequence committed (hang_disk_load at the meet, or poll_disk_loads), never over pages the trie
// holds. persist_to_disk() moves every unpinned cached page there (shutdown). Events name the disk tier as
// Tier::Disk: a page is Stored there when the host tier's drop hands it to the disk (whether written now or
// found there), and Removed when the disk tier reports it gone (evicted, refused, dropped, the tier turned
// off), at the next spill, disk lookup or persist; pages a previous run left on disk are published only once
// this run hands them over again. Thread model: single owner thread (the scheduler); nothing here is
// thread-safe. The PageCopier, an attached event sink and an attached disk tier must outlive the KvCache.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/disk_page_store.h"
#include "cache/host_page_memory.h"
#include "cache/page_copier.h"
#include "cache/page_pool.h"
#include "cache/prefix_trie.h"

namespace kvtrie {

struct KvCacheConfig {
  std::uint32_t page_tokens = 16;       // P: tokens per page
  std::size_t page_bytes = 0;           // bytes of one page: P tokens of every layer's K and V
  std::size_t device_budget_bytes = 0;  // --kv-device-mb
  std::size_t host_budget_bytes = 0;    // --kv-host-mb (0: no host tier; cold pages are dropped)
  double group_device_share = 1.0;      // --tenant-kv-share: a group's share of the device tier (1: no limit)
  // Pool capacities (whole pages of each budget): what the PageCopier's memory must provide.
  std::uint32_t device_pages() const {
    return page_bytes == 0 ? 0 : static_cast<std::uint32_t>(device_budget_bytes / page_bytes);
  }
  std::uint32_t host_pages() const {
    return page_bytes == 0 ? 0 : static_cast<std::uint32_t>(host_budget_bytes / page_bytes);
  }
};

enum class SeqId : std::uint64_t {};

struct AcquireResult {
  SeqId seq;
  std::uint32_t cached_tokens = 0;      // prompt tokens whose KV is reused: compute from this position on
  std::uint32_t device_hit_tokens = 0;  // of cached_tokens, found on device
  std::uint32_t host_hit_tokens = 0;    // of cached_tokens, promoted from host
  std::uint32_t disk_hit_tokens = 0;    // of cached_tokens, read from the disk tier (then promoted)
  bool copied_on_write = false;         // the last reused page was copied into a private page
};

// A run of a prompt's pages read from the disk tier into the host tier: its first position and its tokens.
struct DiskRun {
  std::uint32_t start = 0, tokens = 0;
};
using DiskLoadId = std::uint64_t;
struct DiskLoadDone {
  DiskLoadId id = 0;
  DiskRun run;  // tokens 0: nothing was hung (a read failed at once, or the pages were cached meanwhile)
};

enum class ReserveStatus {
  Ok,
  NoRoom,  // every device page is pinned or reserved by running sequences: preempt one and retry
};

struct KvCacheStats {
  std::uint64_t hit_tokens_device = 0;     // prompt tokens reused from device pages
  std::uint64_t hit_tokens_host = 0;       // prompt tokens reused from host pages (promoted)
  std::uint64_t hit_tokens_disk = 0;       // prompt tokens reused from disk pages (read, then promoted)
  std::uint64_t disk_loaded_pages = 0;     // pages read from the disk tier into host pages
  std::uint64_t disk_spilled_pages = 0;    // pages the host tier dropped that the disk tier took
  std::uint64_t disk_loads_discarded = 0;  // background reads of which the trie held pages meanwhile
  std::uint64_t miss_tokens = 0;           // prompt tokens that had to be computed
  std::uint64_t promoted_pages = 0;
  std::uint64_t demoted_pages = 0;
  std::uint64_t evicted_device_pages = 0;  // dropped from device without a host copy
  std::uint64_t evicted_host_pages = 0;    // dropped from host
  std::uint64_t cow_pages = 0;             // partial pages copied on write
  std::uint64_t copy_bytes = 0;            // bytes queued to the copier, all directions
  std::uint64_t failed_promotions = 0;     // host hits recomputed for lack of device room
  std::uint32_t device_pages_used = 0, device_pages_capacity = 0;
  std::uint32_t host_pages_used = 0, host_pages_capacity = 0;
  std::size_t device_bytes_used = 0, device_bytes_budget = 0;
  std::size_t host_bytes_used = 0, host_bytes_budget = 0;
  std::uint32_t trie_nodes = 0;
  std::uint32_t device_pages_cached = 0, host_pages_cached = 0;  // stored in the trie
  std::uint32_t device_pages_evictable = 0, device_pages_pinned = 0;
  std::uint32_t sequences = 0;
};

class KvCache {
 public:
  KvCache(const KvCacheConfig& config, PageCopier& copier);
  ~KvCache();  // waits for copies in flight
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  std::uint32_t page_tokens() const { return config_.page_tokens; }

  // Starts a sequence for prompt (non-empty) in namespace ns, owned by `group` (0: none; a namespace always
  // has the same group). Never fails: when promotion or the copy-on-write page finds no room it reuses less.
  // Queues copies: read its pages once ready() (or sync()). `from_disk`: the run a background read of this
  // prompt hung (poll_disk_loads), which is reported as disk hits rather than host hits. read_disk false:
  // the disk tier is not looked up (a background read of the prompt is in flight).
  AcquireResult acquire(NamespaceId ns, std::span<const TokenId> prompt, GroupId group = 0,
                        DiskRun from_disk = {}, bool read_disk = true);
  // Starts reading the prompt's pages past its cached prefix that the disk tier holds into fresh host pages,
  // in the background (a thread of its own; the prefix they hang from is pinned meanwhile). nullopt: nothing
  // to read. Returns at once; poll_disk_loads() finishes it. last_first: the last page is read first, so
  // that a sequence may compute the run's first pages meanwhile and the two meet in the middle
  // (disk_load_floor, limit_disk_load); the pages read hang only below what the trie then holds.
  std::optional<DiskLoadId> start_disk_load(NamespaceId ns, std::span<const TokenId> prompt,
                                            GroupId group = 0, bool last_first = false);
  // Whether the run's pages were in memory when the read started (DiskPageStore::in_memory: in the OS page
  // cache, or queued for writing), so that it reads faster than a sequence could compute them.
  bool disk_load_in_memory(DiskLoadId id) const { return disk_load(id).in_memory; }
  // Of a read of the last page first: where the pages it has read so far begin. They hold the prompt's
  // positions [floor, end of the run) (the run's end while none is read). Page-aligned; only falls while
  // the read goes on.
  std::uint32_t disk_load_floor(DiskLoadId id) const;
  // Of a read of the last page first: it starts no page below `position` from now on (a sequence is
  // computing those positions).
  void limit_disk_load(DiskLoadId id, std::uint32_t position);
  // A read of the last page first, where a sequence's computing has met it (its position is at or past
  // disk_load_floor): hangs the pages read so far that follow what the trie holds (as poll_disk_loads
  // would) without waiting for the reads in flight, and starts no more. Returns the run hung; the load
  // stays in flight until its reads are done, and poll_disk_loads then reports it with an empty run.
  DiskRun hang_disk_load(DiskLoadId id);
  // Finishes the background reads that are done (with wait, all of them): the pages each read that the trie
  // does not hold yet and that follow what it holds (the prefix the read started from, plus what a sequence
  // computed of the run meanwhile) are hung in the trie as a host-only node, as acquire()'s own read would;
  // the others are given back. Cheap when none is done; call it before every step.
  std::vector<DiskLoadDone> poll_disk_loads(bool wait = false);
  // Waits until a background read is done or `timeout` passes (for an owner with nothing else to do).
  void wait_for_disk_load(std::chrono::milliseconds timeout);
  std::size_t disk_loads_in_flight() const { return disk_loads_.size(); }
  // Grows the sequence's page table to cover positions [0, total_tokens). NoRoom leaves it unchanged.
  [[nodiscard]] ReserveStatus reserve(SeqId seq, std::uint32_t total_tokens);
  // Declares that the KV of `tokens` (following the sequence's committed tokens) is written; caches the
  // sequence's whole committed prefix. Positions must be reserved. A full page the trie already held (the
  // same tokens cached before: a recomputed continuation, or the page copied on write at acquire) replaces
  // the sequence's own copy in its page table, which is freed: a sequence never holds two copies of a full
  // page (done at the first commit with no copy in flight).
  void commit(SeqId seq, std::span<const TokenId> tokens);
  // Ends the sequence: unpins its prefix and drops its page references.
  void release(SeqId seq);
  // Whether the sequence's promotion and copy-on-write copies (and every copy queued before it started)
  // are complete, so a forward pass may read its page table. Does not block.
  bool ready(SeqId seq) const;
  // Without blocking: when every queued copy is complete, completes promotions (their host copies are
  // freed) and frees the pages of sequences released meanwhile. Cheap; call it before every step.
  void poll();
  // As poll(), but first waits for every queued copy. A no-op when no copy is in flight.
  void sync();
  bool copies_in_flight() const { return !in_flight_.empty(); }
  // Drops every cached page no running sequence pins, on both tiers (admin flush; counted as evictions).
  // Waits for copies in flight first. Returns the number of pages dropped.
  std::uint32_t flush();
  // Gives the cache a disk tier (call before the first acquire): host-tier drops go to disk and prompts are
  // looked up there. memory is the host tier's bytes (the copier's host pages).
  void attach_disk_tier(DiskPageStore& disk, HostPageMemory& memory);
  // Moves every cached page no sequence pins to the disk tier (through the host tier), e.g. at shutdown,
  // and waits for the disk writes. Returns the pages queued to disk. A no-op without a disk tier.
  std::uint32_t persist_to_disk();
  // Publishes every later change of the cached pages to sink (nullptr: none); call before the first acquire.
  void set_event_sink(KvEventSink* sink) { trie_.set_event_sink(sink); }
  // The hash of every full page cached, by tier: what a router rebuilds from the events.
  PageHashListing page_hashes() const { return trie_.page_hashes(); }

  // The sequence's page table: device page of each page-sized block of positions, in order.
  std::span<const PageId> page_table(SeqId seq) const;
  std::span<const TokenId> committed_tokens(SeqId seq) const;
  // Reuse the cache would offer now (no side effects): for admission decisions and tests.
  MatchResult peek(NamespaceId ns, std::span<const TokenId> tokens) const { return trie_.match(ns, tokens); }

  // What acquire(ns, tokens) would reuse now, without side effects (it reuses at most tokens.size() - 1):
  // the tokens cached on device and on host, and the device pages it would pin that no sequence pins now.
  struct ReusePreview {
    std::uint32_t device_tokens = 0;
    std::uint32_t host_tokens = 0;
    std::uint32_t unpinned_device_pages = 0;
  };
  ReusePreview preview_acquire(NamespaceId ns, std::span<const TokenId> tokens) const;
  // Device pages reserve() could obtain now: free pages plus every cached page no sequence pins (each
  // can be demoted or dropped). For admission control: with no copy in flight, reserve() of k new pages
  // succeeds iff k <= this; with copies in flight it may succeed beyond (reserve() waits for them, which
  // frees the pages of sequences released meanwhile and unpins finished promotions).
  std::uint32_t reclaimable_device_pages() const;
  KvCacheStats stats() const;
  std::size_t live_sequences() const { return sequences_.size(); }
  std::uint64_t leases_outstanding() const { return trie_.leases_outstanding(); }
  // Failure injection (tests): forwarded to the pools.
  PagePool& device_pool() { return device_; }
  PagePool& host_pool() { return host_; }
  // Full audit, O(pages + nodes): for tests and debug builds. Throws kvtrie::Error naming the broken rule.
  void check_invariants() const;

 private:
  struct Sequence {
    NamespaceId ns = 0;
    GroupId group = 0;
    std::vector<TokenId> tokens;    // committed (or reused) tokens: their KV is in pages
    std::vector<PageId> pages;      // page table; one reference each
    Lease lease;                    // pins the trie path of the shared prefix
    std::size_t checked_pages = 0;  // full pages of the table already checked against the trie (commit)
    CopyTicket ready_at = 0;        // its page table may be read once the copier completes this ticket
  };

  Sequence& sequence(SeqId seq);
  const Sequence& sequence(SeqId seq) const;
  // Frees device pages until `pages` are free (false when it cannot), for a sequence of `group`.
  bool make_device_room(std::uint32_t pages, GroupId group);
  // The next device page to demote or drop for a sequence of `group` (nullptr: none left).
  TrieNode* device_victim(std::uint32_t pages, GroupId group) const;
  bool make_host_room(std::uint32_t pages);
  // Queues the full pages of a host-only node about to be dropped to the disk tier.
  void spill_to_disk(const TrieNode* node);
  // Publishes Removed events for the published disk pages the disk tier reports gone.
  void publish_disk_removals();
  // A run of disk pages being read into host pages: the prefix it hangs from (pinned), its tokens (owned:
  // the reads point into them), the host pages (one reference each until hung or given back).
  struct DiskLoad {
    DiskLoadId id = 0;
    NamespaceId ns = 0;
    GroupId group = 0;
    Lease at;                                  // the prefix the run follows, pinned
    std::uint32_t start = 0;                   // the run's first position
    std::vector<TokenId> tokens;               // the prompt's tokens up to the run's end
    std::vector<PageHash> hashes;              // of the run's pages
    std::vector<PageId> pages;                 // the run's host pages, in position order
    std::vector<DiskPageRead> reads;           // in the order they are read
    bool last_first = false;                   // reads[0] is the run's last page
    bool in_memory = false;                    // its pages were in memory at the start
    bool hung = false;                         // its pages read were hung (or given back): nothing more hangs
    std::size_t hung_begin = 0, hung_end = 0;  // the pages the trie took then (the rest are the load's)
    DiskRunProgress progress;
    std::future<std::size_t> loaded;  // pages read, from the first of reads (background reads)
    std::uint32_t end() const { return static_cast<std::uint32_t>(tokens.size()); }
    bool trie_holds(std::size_t page) const { return page >= hung_begin && page < hung_end; }
  };
  // The run of usable past its cached prefix that the disk tier holds, in fresh host pages (nullptr: none),
  // to read in position order or the last page first.
  std::unique_ptr<DiskLoad> prepare_disk_load(NamespaceId ns, std::span<const TokenId> usable, GroupId group,
                                              bool last_first);
  // Releases every host page the load still holds (all but those it hung).
  void give_back(DiskLoad& load);
  // Hangs the run's pages [first, last) (read) that follow what the trie holds of the prompt as a host-only
  // node; returns the run hung. Once per load.
  DiskRun hang_read_pages(DiskLoad& load, std::size_t first, std::size_t last);
  // The read is done: hangs what it read (the first `loaded` of its reads) unless it was hung early, gives
  // the rest back; returns the run hung now.
  DiskRun finish_disk_load(DiskLoad& load, std::size_t loaded);
  // The background read `id` (throws when there is none).
  DiskLoad& disk_load(DiskLoadId id) const;
  // Reads the pages of usable past its cached prefix that the disk tier holds into the host tier (a
  // host-only node below that prefix), on this thread; returns the run read.
  DiskRun load_from_disk(NamespaceId ns, std::span<const TokenId> usable, GroupId group);
  void queue(std::vector<PageCopy> copies);
  void wait_for_copies();
  void retire_copies();  // every queued copy is complete: finish promotions, free retired sequences
  void drop_sequence(Sequence& s);
  void share_cached_pages(Sequence& s);

  KvCacheConfig config_;
  PageCopier& copier_;
  DiskPageStore* disk_ = nullptr;
  bool persisting_ = false;  // persist_to_disk() is running: spills wait for the disk writer's queue
  HostPageMemory* host_memory_ = nullptr;
  std::unordered_set<PageHash> disk_published_;  // disk pages an event sink was told of (Stored, no Removed)
  PagePool device_;
  PagePool host_;
  PrefixTrie trie_;  // after the pools: releases its references into them when destroyed
  std::unordered_map<std::uint64_t, Sequence> sequences_;  // after the trie: leases go first
  std::vector<PageCopy> in_flight_;                        // queued and not yet seen complete
  CopyTicket last_ticket_ = 0;                             // of the last batch queued
  std::vector<Sequence> retired_;     // released while copies were in flight; freed after the wait
  std::vector<PageId> copy_sources_;  // a reference on each copy-on-write source until its copy completes
  std::vector<std::unique_ptr<DiskLoad>> disk_loads_;  // background reads (after the trie: leases first)
  std::uint64_t next_seq_ = 1;
  DiskLoadId next_disk_load_ = 1;
  KvCacheStats stats_;
};

}  // namespace kvtrie
