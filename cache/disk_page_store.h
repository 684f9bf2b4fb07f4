// Contract: DiskPageStore is the disk tier: KV pages kept as files in one directory (cache/disk_page_file.h),
// named by the store's fingerprint (the model file and its KV layout, computed by the caller) and each page's
// chained hash (cache/page_hash.h, which covers the namespace and the whole prefix), within a byte budget,
// evicted least recently used. The files survive a restart: a store opened on the same directory with the
// same fingerprint finds them; pages of another fingerprint are never read, but they count against the budget
// and are evicted first when colder (a model switch does not leak disk).
//
// Opening lists the directory (names and sizes, no contents): it creates it 0700, takes an exclusive lock
// on DIR/.lock (a second daemon on the same directory gets no disk tier), removes temporary files a crash
// left, and files of this fingerprint whose size is wrong, and evicts down to the budget. Last use survives
// a restart as each file's mtime (set on every write and read).
//
// Writes: store() copies the page and queues it; one worker thread writes it (temporary file + rename), so
// the caller never waits for the disk. A queue over max_queued_bytes drops the page (counted) rather than
// block. A write failure (full disk, I/O error, an injected one) disables the tier with one log line: every
// call then behaves as if there were no disk tier (store() drops, contains() is false, load() says
// Disabled); the files already written stay for the next start.
// Reads: load() reads a page into the caller's memory on the calling thread, serving a page still queued
// from its copy. load_run() reads a run of pages (a prompt's, in order) with config.reader_threads reads in
// flight at once (ParallelFor: the caller's thread and helpers), every page checked as load() checks it;
// it stops at the first page that fails. A file that is truncated, corrupt or foreign (checksum, size,
// header) is refused: logged once, removed, never loaded.
//
// Gone pages: take_removed() hands over the hashes of this fingerprint's pages that stopped being available
// since the last call (evicted, refused, missing, a queued write dropped, or all of them when the tier turns
// off), so the cache can publish them as KV events (cache/kv_event_sink.h) on its own thread.
//
// Threads: every public method is safe from any thread. The destructor writes what is still queued, then
// joins the worker.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/disk_page_file.h"
#include "cache/parallel_for.h"
#include "cache/trie_node.h"

namespace kvtrie {

struct DiskPageStoreConfig {
  std::filesystem::path dir;
  std::uint64_t budget_bytes = 0;  // --kv-disk-mb: files of every fingerprint together
  std::uint64_t fingerprint = 0;   // model file and KV layout: pages of another are never used
  std::uint32_t page_tokens = 16;
  std::size_t page_bytes = 0;
  std::size_t max_queued_bytes = std::size_t{256} << 20;  // pages waiting for the writer
  // Page reads in flight in load_run() (>= 1). A virtual or NVMe disk needs a deep queue: on the lent H100
  // machine's disk, 511 pages of 2 MiB read at 1.42-1.46 GB/s with 8, 1.48-1.70 with 32 and 1.78-1.81 with
  // 64 (its plain sequential read: 1.0-1.25 GB/s; session 20). Idle helpers only wait on a condition.
  std::uint32_t reader_threads = 64;
  std::chrono::milliseconds read_delay{
      0};  // latency injection (tests): every page read first waits this long
};

// One page for load_run(): its hash and tokens, and the memory it is read into (page_bytes).
struct DiskPageRead {
  PageHash hash = 0;
  std::span<const TokenId> tokens;
  std::span<std::byte> out;
};

// How far a load_run() in progress got, and where it stops: shared between it and the thread that started it.
struct DiskRunProgress {
  std::atomic<std::size_t> loaded{0};  // pages [0, loaded) of the run are read and checked
  // Pages from this index on are not started (any thread may lower it while the run goes on).
  std::atomic<std::size_t> limit{SIZE_MAX};
};

struct DiskPageStoreStats {
  bool enabled = false;
  std::uint64_t pages = 0;  // files of this fingerprint
  std::uint64_t bytes = 0;  // bytes of every page file in the directory (what the budget bounds)
  std::uint64_t budget_bytes = 0;
  std::uint64_t writes = 0, write_bytes = 0;  // pages written
  std::uint64_t reads = 0, read_bytes = 0;    // pages loaded (from a file or the queue)
  std::uint64_t evictions = 0;                // files removed for the budget
  std::uint64_t refused = 0;                  // truncated, corrupt or foreign files removed
  std::uint64_t dropped_writes = 0;           // pages not written: queue full, tier disabled, over budget
  std::uint64_t queued_bytes = 0;
};

enum class DiskLoadStatus { Ok, Missing, Refused, Disabled };

class DiskPageStore {
 public:
  // Never throws for an unusable directory: the store opens disabled and says why in one log line.
  explicit DiskPageStore(DiskPageStoreConfig config);
  ~DiskPageStore();
  DiskPageStore(const DiskPageStore&) = delete;
  DiskPageStore& operator=(const DiskPageStore&) = delete;

  const DiskPageStoreConfig& config() const { return config_; }
  bool enabled() const { return enabled_.load(); }
  // Whether the page is on disk or queued (a later load() may still miss: evicted or refused meanwhile).
  bool contains(PageHash hash) const;
  // Queues the page (tokens: its P token ids; bytes: page_bytes of KV) for writing; copies both. A page
  // already stored or queued is only marked used. False when dropped (disabled, queue full, over budget).
  // With wait_for_room (persisting at shutdown, where nothing else waits) a full queue is waited out
  // instead of dropping the page.
  bool store(PageHash hash, std::span<const TokenId> tokens, std::span<const std::byte> bytes,
             bool wait_for_room = false);
  // Reads the page into out (page_bytes) after checking it is exactly this page (tokens included).
  DiskLoadStatus load(PageHash hash, std::span<const TokenId> tokens, std::span<std::byte> out);
  // Reads pages[0], pages[1], ... (several at once) and returns how many leading pages loaded Ok: the run
  // ends at the first page that is missing, refused or unreadable (pages past it may be left unread or
  // read for nothing; their out bytes are unspecified). 0 when the tier is disabled. With progress, the
  // leading pages loaded so far are published as they complete, and pages from progress->limit on are not
  // started.
  std::size_t load_run(std::span<const DiskPageRead> pages, DiskRunProgress* progress = nullptr);
  // Whether a run's pages (its hashes) are in memory now, so that reading them costs no disk time: each
  // still queued for writing, or its file wholly in the OS page cache (page_file_in_memory), probed on up to
  // `samples` pages spread over the run, its first and last among them. A service restart finds the files
  // its predecessor just wrote there; a reboot does not. False with an injected read delay (a slow disk).
  bool in_memory(std::span<const PageHash> hashes, std::size_t samples = 16) const;
  // Blocks until every queued page is written (or dropped by a failure).
  void drain();
  DiskPageStoreStats stats() const;
  // The hashes of pages of this fingerprint gone since the last call (possibly including pages never
  // stored by this process: found at open, or stored and gone again), oldest first.
  std::vector<PageHash> take_removed();
  // Failure injection (tests): the Nth write from now (1-based) fails as a full disk would. 0 disarms.
  void fail_nth_write(std::uint64_t n) { fail_countdown_.store(n); }

 private:
  struct Key {
    std::uint64_t fingerprint;
    PageHash hash;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    std::uint64_t bytes = 0;
    std::uint64_t tick = 0;  // last use; the LRU set is ordered by it
  };
  struct Job {
    PageHash hash;
    std::vector<TokenId> tokens;
    std::vector<std::byte> bytes;
  };

  void open_directory();
  void scan_directory();
  void disable(const std::string& why);  // caller holds mutex_
  void worker_loop();
  void write_one(const std::shared_ptr<const Job>& job);
  // Removes least recently used files until `incoming` more bytes fit the budget; false when they cannot.
  bool make_room(std::uint64_t incoming, std::unique_lock<std::mutex>& lock);
  void touch(const Key& key);   // caller holds mutex_
  void forget(const Key& key);  // caller holds mutex_
  std::filesystem::path path_of(const Key& key) const;

  const DiskPageStoreConfig config_;
  std::atomic<bool> enabled_{false};
  std::atomic<std::uint64_t> fail_countdown_{0};
  int lock_fd_ = -1;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::map<Key, Entry> files_;
  std::set<std::pair<std::uint64_t, Key>> lru_;  // (tick, key), coldest first
  std::uint64_t tick_ = 0;
  std::uint64_t bytes_on_disk_ = 0;
  std::uint64_t own_pages_ = 0;
  std::deque<std::shared_ptr<const Job>> queue_;
  std::unordered_map<PageHash, std::shared_ptr<const Job>> pending_;  // queued or being written
  std::uint64_t queued_bytes_ = 0;
  std::vector<PageHash> removed_;  // see take_removed()
  bool stopping_ = false;
  DiskPageStoreStats counters_;
  std::mutex run_mutex_;  // one load_run() at a time: the reader runs one job at a time
  std::unique_ptr<ParallelFor> reader_;
  std::thread worker_;  // last: started once every member above exists
};

}  // namespace kvtrie
