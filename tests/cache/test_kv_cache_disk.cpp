// KvCache with a disk tier: host-tier drops go to disk, a later prompt (also in a new cache over the same
// directory: a restart) reads its pages back through the host tier and reuses them with the right KV,
// persist_to_disk() saves what the device holds, pages of another namespace are not found, and a disk tier
// turned off by a write failure leaves the cache serving, and KV events tell of the pages the disk tier takes
// and loses (Tier::Disk). The scheduler's background reads (start_disk_load, poll_disk_loads) hang the same
// pages while the cache serves other prompts, give back a run the trie cached meanwhile, and a cache
// destroyed with a read in flight waits for it. A read of the last page first meets a sequence computing the
// first pages: it reads nothing below where the computing will be, and hangs only what follows the computed
// pages. Page contents are simulated (simulated_kv.h).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <numeric>
#include <set>
#include <thread>

#include "cache/disk_page_store.h"
#include "cache/kv_cache.h"
#include "cache/page_hash.h"
#include "tests/cache/kv_event_index.h"
#include "tests/cache/simulated_kv.h"
#include "tests/support/paths.h"

namespace kvtrie {
namespace {

using test::kv_values;
using test::SimulatedCopier;

constexpr std::uint32_t kP = 4;
constexpr std::size_t kPageBytes = kP * sizeof(std::uint64_t);  // a simulated page: P KV values

std::vector<TokenId> range(TokenId first, int n) {
  std::vector<TokenId> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// The chained hashes of the prompt's full pages in namespace ns.
std::set<PageHash> page_hashes_of(NamespaceId ns, const std::vector<TokenId>& prompt) {
  std::set<PageHash> out;
  PageHash hash = namespace_page_seed(ns);
  for (std::size_t i = 0; i + kP <= prompt.size(); i += kP)
    out.insert(hash = chain_page_hash(hash, std::span(prompt).subspan(i, kP)));
  return out;
}

class KvCacheDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir() / "kv";
    std::filesystem::remove_all(dir_);
  }
  // A fresh process's cache over the same directory.
  // queued_pages: the disk writer's queue (0: the default, far more than these tests store).
  void make(std::uint32_t device_pages, std::uint32_t host_pages, std::uint64_t disk_pages = 1000,
            std::uint64_t queued_pages = 0) {
    cache_.reset();  // before its copier and disk tier
    disk_.reset();
    copier_ = std::make_unique<SimulatedCopier>(kP, device_pages, host_pages);
    DiskPageStoreConfig disk;
    disk.dir = dir_;
    disk.fingerprint = 42;
    disk.page_tokens = kP;
    disk.page_bytes = kPageBytes;
    disk.budget_bytes = disk_pages * page_file_bytes(kP, kPageBytes);
    if (queued_pages != 0) disk.max_queued_bytes = queued_pages * kPageBytes;
    disk.read_delay = read_delay_;
    disk.reader_threads = reader_threads_;
    disk_ = std::make_unique<DiskPageStore>(disk);
    cache_ = std::make_unique<KvCache>(
        KvCacheConfig{kP, kPageBytes, device_pages * kPageBytes, host_pages * kPageBytes}, *copier_);
    cache_->attach_disk_tier(*disk_, *copier_);
  }

  AcquireResult request(NamespaceId ns, const std::vector<TokenId>& prompt, DiskRun from_disk = {}) {
    const AcquireResult r = cache_->acquire(ns, prompt, 0, from_disk);
    cache_->check_invariants();
    cache_->sync();
    EXPECT_EQ(copier_->wrong_positions(cache_->page_table(r.seq), kv_values(ns, prompt), r.cached_tokens), 0u)
        << "reused positions hold another prefix's KV";
    EXPECT_EQ(cache_->reserve(r.seq, static_cast<std::uint32_t>(prompt.size())), ReserveStatus::Ok);
    copier_->write(cache_->page_table(r.seq), kv_values(ns, prompt), r.cached_tokens, prompt.size());
    cache_->commit(r.seq, std::span(prompt).subspan(r.cached_tokens));
    cache_->release(r.seq);
    cache_->check_invariants();
    EXPECT_EQ(r.device_hit_tokens + r.host_hit_tokens + r.disk_hit_tokens, r.cached_tokens);
    return r;
  }

  // A sequence computes the prompt's first `tokens` positions (nothing cached before them) without reading
  // the disk, as the scheduler's does while a read of the prompt's pages is in flight, and commits them.
  void compute_head(NamespaceId ns, const std::vector<TokenId>& prompt, std::uint32_t tokens) {
    const AcquireResult computing = cache_->acquire(ns, prompt, 0, {}, /*read_disk=*/false);
    EXPECT_EQ(computing.cached_tokens, 0u);
    ASSERT_EQ(cache_->reserve(computing.seq, tokens), ReserveStatus::Ok);
    copier_->write(cache_->page_table(computing.seq), kv_values(ns, prompt), 0, tokens);
    cache_->commit(computing.seq, std::span(prompt).first(tokens));
    cache_->release(computing.seq);
  }

  // Caches prompt in namespace 1, persists it to disk, and starts a new cache over the directory (a restart)
  // whose every page read waits `read_delay` (a slow disk for the background reads).
  void persist_and_restart(const std::vector<TokenId>& prompt, std::uint32_t host_pages,
                           std::chrono::milliseconds read_delay) {
    make(16, host_pages);
    request(1, prompt);
    cache_->persist_to_disk();
    read_delay_ = read_delay;
    make(16, host_pages);
  }

  void TearDown() override {
    if (!cache_) return;
    cache_->sync();
    cache_->check_invariants();
    EXPECT_EQ(cache_->leases_outstanding(), 0u);
    const KvCacheStats s = cache_->stats();
    EXPECT_EQ(s.host_pages_used, s.host_pages_cached) << "host pages held outside the trie";
  }

  std::filesystem::path dir_;
  std::chrono::milliseconds read_delay_{0};  // for the next make(): every page read waits this long
  std::uint32_t reader_threads_ = 64;        // ... and this many reads in flight
  std::unique_ptr<SimulatedCopier> copier_;
  std::unique_ptr<DiskPageStore> disk_;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(KvCacheDiskTest, PagesTheHostTierDropsComeBackFromDisk) {
  make(4, 4);
  const auto first = range(100, 16);  // 4 pages: fills the device tier
  request(1, first);
  request(1, range(200, 16));  // first goes to host
  request(1, range(300, 16));  // first goes to disk, the second to host
  disk_->drain();
  EXPECT_GE(cache_->stats().disk_spilled_pages, 4u);
  const AcquireResult again = request(1, first);
  // The last prompt token is computed: of its page only three tokens are usable, and a partial page is
  // never on disk, so the three full pages before it come back.
  EXPECT_EQ(again.cached_tokens, 12u);
  EXPECT_EQ(again.disk_hit_tokens, 12u);
  EXPECT_EQ(again.host_hit_tokens, 0u);
  EXPECT_EQ(cache_->stats().disk_loaded_pages, 3u);
}

TEST_F(KvCacheDiskTest, ARestartFindsPersistedPagesAndOtherNamespacesDoNot) {
  make(16, 8);
  const auto prompt = range(7, 30);
  request(1, prompt);
  EXPECT_EQ(cache_->persist_to_disk(), 7u);  // 30 tokens: 7 full pages; the partial last one is not kept
  make(16, 8);                               // a new process over the same directory
  EXPECT_EQ(cache_->stats().device_pages_cached, 0u);
  const AcquireResult other = request(2, prompt);  // the same tokens in another namespace
  EXPECT_EQ(other.cached_tokens, 0u);
  const AcquireResult again = request(1, prompt);
  EXPECT_EQ(again.disk_hit_tokens, 28u);
  EXPECT_EQ(again.cached_tokens, 28u);
  // A longer prompt with the same head: the rest of the pages the disk has, then computes the tail.
  make(16, 8);
  auto longer = prompt;
  longer.insert(longer.end(), {1, 2, 3, 4, 5});
  EXPECT_EQ(request(1, longer).disk_hit_tokens, 28u);
}

// The scheduler's path: the pages are read in the background while the cache serves another prompt, hung in
// the trie by poll_disk_loads(), and the prompt's acquire counts them as disk hits with the right KV.
TEST_F(KvCacheDiskTest, ABackgroundReadHangsThePagesWhileTheCacheServesAnotherPrompt) {
  const auto prompt = range(7, 30);
  persist_and_restart(prompt, 8, std::chrono::milliseconds(300));
  const std::optional<DiskLoadId> id = cache_->start_disk_load(1, prompt);
  ASSERT_TRUE(id.has_value());
  EXPECT_FALSE(cache_->start_disk_load(2, prompt).has_value()) << "another namespace has nothing on disk";
  // Served while the read is in flight (request() audits the cache, the read's host pages included).
  EXPECT_EQ(request(3, range(500, 12)).cached_tokens, 0u);
  EXPECT_EQ(cache_->disk_loads_in_flight(), 1u) << "the read (300 ms a page) ended before the other prompt";
  EXPECT_TRUE(cache_->poll_disk_loads().empty()) << "a read in flight is not done";
  const std::vector<DiskLoadDone> done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, *id);
  EXPECT_EQ(done[0].run.start, 0u);
  EXPECT_EQ(done[0].run.tokens, 28u);
  EXPECT_EQ(cache_->disk_loads_in_flight(), 0u);
  const AcquireResult again = request(1, prompt, done[0].run);
  EXPECT_EQ(again.cached_tokens, 28u);
  EXPECT_EQ(again.disk_hit_tokens, 28u);
  EXPECT_EQ(again.host_hit_tokens, 0u);
  EXPECT_EQ(cache_->stats().disk_loaded_pages, 7u);
}

// The prompt starts (and reads its pages itself) before the background read of them is done: that read's
// pages are given back, not hung twice.
TEST_F(KvCacheDiskTest, ABackgroundReadOfPagesCachedMeanwhileIsGivenBack) {
  const auto prompt = range(7, 30);
  persist_and_restart(prompt, 16, std::chrono::milliseconds(100));
  ASSERT_TRUE(cache_->start_disk_load(1, prompt).has_value());
  EXPECT_EQ(request(1, prompt).disk_hit_tokens, 28u);
  const std::vector<DiskLoadDone> done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].run.tokens, 0u);
  EXPECT_EQ(cache_->stats().disk_loads_discarded, 1u);
  EXPECT_EQ(cache_->stats().disk_loaded_pages, 7u);
}

// The scheduler's overlap: the read takes the last page first (one read in flight, 200 ms a page) while a
// sequence computes the first five pages; told where the computing ends, it reads nothing below, and its two
// pages hang after the computed ones, so the prompt then finds all seven: five on device, two from disk.
TEST_F(KvCacheDiskTest, AReadOfTheLastPagesFirstMeetsASequenceComputingTheFirstOnes) {
  const auto prompt = range(7, 30);
  reader_threads_ = 1;
  persist_and_restart(prompt, 16, std::chrono::milliseconds(200));
  const std::optional<DiskLoadId> id = cache_->start_disk_load(1, prompt, 0, /*last_first=*/true);
  ASSERT_TRUE(id.has_value());
  cache_->limit_disk_load(*id, 20);  // the sequence computes positions [0, 20)
  EXPECT_EQ(cache_->disk_load_floor(*id), 28u) << "nothing is read yet: the floor is the run's end";
  compute_head(1, prompt, 20);
  cache_->wait_for_disk_load(std::chrono::seconds(10));
  EXPECT_EQ(cache_->disk_load_floor(*id), 20u) << "pages 6 and 5 read, nothing below the computing";
  const std::vector<DiskLoadDone> done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].run.start, 20u);
  EXPECT_EQ(done[0].run.tokens, 8u);
  EXPECT_EQ(disk_->stats().reads, 2u) << "the read went below where the computing ended";
  const AcquireResult again = request(1, prompt, done[0].run);
  EXPECT_EQ(again.cached_tokens, 28u);
  EXPECT_EQ(again.device_hit_tokens, 20u);
  EXPECT_EQ(again.disk_hit_tokens, 8u);
  EXPECT_EQ(cache_->stats().disk_loads_discarded, 0u);
}

// Where the computing meets the read, hang_disk_load() hangs the pages read so far at once, while the read
// of the page below them (computed already) is still in flight: that one is given back when it is done.
TEST_F(KvCacheDiskTest, AMeetHangsThePagesReadWithoutWaitingForTheReadsInFlight) {
  const auto prompt = range(7, 30);
  reader_threads_ = 1;
  persist_and_restart(prompt, 16, std::chrono::milliseconds(300));
  const std::optional<DiskLoadId> id = cache_->start_disk_load(1, prompt, 0, /*last_first=*/true);
  ASSERT_TRUE(id.has_value());
  compute_head(1, prompt, 20);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache_->disk_load_floor(*id) > 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto met = std::chrono::steady_clock::now();
  ASSERT_EQ(cache_->disk_load_floor(*id), 20u);
  const DiskRun run = cache_->hang_disk_load(*id);
  EXPECT_LT(std::chrono::steady_clock::now() - met, std::chrono::milliseconds(150))
      << "it waited for the read in flight";
  EXPECT_EQ(run.start, 20u);
  EXPECT_EQ(run.tokens, 8u);
  EXPECT_EQ(cache_->disk_loads_in_flight(), 1u) << "page 4's read is still in flight";
  cache_->check_invariants();
  const std::vector<DiskLoadDone> done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].run.tokens, 0u) << "told at the meet already";
  const AcquireResult again = request(1, prompt, run);
  EXPECT_EQ(again.cached_tokens, 28u);
  EXPECT_EQ(again.device_hit_tokens, 20u);
  EXPECT_EQ(again.disk_hit_tokens, 8u);
}

// A limit past the run (a request cancelled while its read is in flight) starts no more reads: of the seven
// pages only the one in flight when it came is read, and nothing hangs (the trie holds nothing it follows).
TEST_F(KvCacheDiskTest, ALimitPastTheRunStopsTheRead) {
  const auto prompt = range(7, 30);
  reader_threads_ = 1;
  persist_and_restart(prompt, 16, std::chrono::milliseconds(200));
  const std::optional<DiskLoadId> id = cache_->start_disk_load(1, prompt, 0, /*last_first=*/true);
  ASSERT_TRUE(id.has_value());
  cache_->limit_disk_load(*id, UINT32_MAX);
  const std::vector<DiskLoadDone> done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].run.tokens, 0u);
  EXPECT_LE(disk_->stats().reads, 1u);
}

// Read the last page first with nothing computed: a whole run hangs below the cached prefix, as a read in
// order would; a run cut short by a corrupt page does not reach that prefix and is given back (a read in
// order then takes the pages before the corrupt one).
TEST_F(KvCacheDiskTest, AReadOfTheLastPagesFirstHangsOnlyARunThatReachesTheTrie) {
  const auto prompt = range(7, 30);
  persist_and_restart(prompt, 16, std::chrono::milliseconds(0));
  ASSERT_TRUE(cache_->start_disk_load(1, prompt, 0, true).has_value());
  std::vector<DiskLoadDone> done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].run.start, 0u);
  EXPECT_EQ(done[0].run.tokens, 28u);
  EXPECT_EQ(request(1, prompt, done[0].run).disk_hit_tokens, 28u);

  persist_and_restart(prompt, 16, std::chrono::milliseconds(0));
  // Page 3 of the prompt (positions 12-15) corrupt: pages 6, 5 and 4 read, then the run ends.
  PageHash hash = namespace_page_seed(1);
  for (std::size_t i = 0; i <= 3; ++i) hash = chain_page_hash(hash, std::span(prompt).subspan(i * kP, kP));
  const std::filesystem::path page3 = dir_ / page_file_name(42, hash);
  ASSERT_TRUE(std::filesystem::exists(page3));
  std::filesystem::resize_file(page3, 10);
  ASSERT_TRUE(cache_->start_disk_load(1, prompt, 0, true).has_value());
  done = cache_->poll_disk_loads(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].run.tokens, 0u);
  EXPECT_EQ(cache_->stats().disk_loads_discarded, 1u);
  EXPECT_EQ(request(1, prompt).disk_hit_tokens, 12u)
      << "a read in order takes the pages before the corrupt one";
}

// Committing a host chunk fails while a background read maps its pages (write_host_page throws): the error
// reaches the caller, the read's host pages and its pin on the prefix are given back (the audit and TearDown
// count them), nothing is left in flight, and the prompt is read from disk once the host memory is back.
TEST_F(KvCacheDiskTest, AHostPageThatCannotBeWrittenGivesTheReadsPagesBack) {
  const auto prompt = range(7, 30);
  persist_and_restart(prompt, 8, std::chrono::milliseconds(0));
  const std::uint64_t used = cache_->stats().host_pages_used;
  copier_->fail_host_writes_after(3);  // the fourth of the seven pages
  EXPECT_ANY_THROW(cache_->start_disk_load(1, prompt));
  cache_->check_invariants();
  EXPECT_EQ(cache_->stats().host_pages_used, used);
  EXPECT_EQ(cache_->disk_loads_in_flight(), 0u);
  EXPECT_EQ(cache_->leases_outstanding(), 0u) << "the prefix stayed pinned";
  copier_->fail_host_writes_after(-1);
  EXPECT_EQ(request(1, prompt).disk_hit_tokens, 28u);
}

// Destroying the cache waits for a read in flight (its pages are the host memory's owner's to free after);
// the next cache over the directory finds every page.
TEST_F(KvCacheDiskTest, ACacheDestroyedWithABackgroundReadInFlightWaitsForIt) {
  const auto prompt = range(7, 30);
  persist_and_restart(prompt, 8, std::chrono::milliseconds(100));
  ASSERT_TRUE(cache_->start_disk_load(1, prompt).has_value());
  cache_.reset();
  make(16, 8);
  EXPECT_EQ(request(1, prompt).disk_hit_tokens, 28u);
}

// Persisting at shutdown waits out the writer's queue instead of dropping what overflows it (a queue of two
// pages for seven: a restart then finds them all, where it found two).
TEST_F(KvCacheDiskTest, PersistingMorePagesThanTheWritersQueueHoldsKeepsThemAll) {
  make(16, 8, 1000, 2);
  const auto prompt = range(7, 30);
  request(1, prompt);
  EXPECT_EQ(cache_->persist_to_disk(), 7u);
  EXPECT_EQ(disk_->stats().dropped_writes, 0u);
  make(16, 8, 1000, 2);
  EXPECT_EQ(request(1, prompt).disk_hit_tokens, 28u);
}

TEST_F(KvCacheDiskTest, ADiskHitLargerThanTheHostTierReusesWhatFits) {
  make(16, 2);
  const auto prompt = range(50, 40);  // 10 pages
  request(1, prompt);
  cache_->persist_to_disk();
  make(16, 2);
  const AcquireResult again = request(1, prompt);
  EXPECT_EQ(again.disk_hit_tokens, 8u);  // two host pages' worth; the rest is recomputed
  EXPECT_EQ(again.cached_tokens, 8u);
}

TEST_F(KvCacheDiskTest, ADiskTierTurnedOffByAWriteFailureLeavesTheCacheServing) {
  make(4, 4);
  disk_->fail_nth_write(1);
  request(1, range(100, 16));
  request(1, range(200, 16));
  request(1, range(300, 16));
  disk_->drain();
  EXPECT_FALSE(disk_->enabled());
  const AcquireResult again = request(1, range(100, 16));
  EXPECT_EQ(again.cached_tokens, 0u);
  EXPECT_EQ(cache_->persist_to_disk(), 0u);
}

TEST_F(KvCacheDiskTest, ACorruptPageIsRecomputedFromThere) {
  make(8, 4);
  const auto prompt = range(9, 24);  // 6 pages
  request(1, prompt);
  cache_->persist_to_disk();
  make(8, 4);
  // Damage the fourth page: the first three come back, the rest is computed.
  const std::vector<TokenId> head(prompt.begin(), prompt.begin() + 16);
  PageHash hash = namespace_page_seed(1);
  for (int i = 0; i < 4; ++i) hash = chain_page_hash(hash, std::span(head).subspan(i * kP, kP));
  std::filesystem::resize_file(dir_ / page_file_name(42, hash), 10);
  const AcquireResult again = request(1, prompt);
  EXPECT_EQ(again.disk_hit_tokens, 12u);
  EXPECT_EQ(disk_->stats().refused, 1u);
}

TEST_F(KvCacheDiskTest, ALongRunReadInParallelComesBackWholeOrUpToACorruptPage) {
  // The disk tier reads a prompt's pages several at a time (load_run): the KV must be that of one-by-one
  // reads, and a corrupt page in the middle must end the reuse there with the cache consistent.
  const auto prompt = range(100, 40 * kP + 1);  // 40 full pages
  make(48, 48);
  request(1, prompt);
  cache_->persist_to_disk();
  make(48, 48);
  const AcquireResult whole = request(1, prompt);  // checks every reused position's KV
  EXPECT_EQ(whole.disk_hit_tokens, 40 * kP);
  EXPECT_EQ(cache_->stats().disk_loaded_pages, 40u);

  make(48, 48);
  PageHash hash = namespace_page_seed(1);
  for (int i = 0; i < 24; ++i) hash = chain_page_hash(hash, std::span(prompt).subspan(i * kP, kP));
  std::filesystem::resize_file(dir_ / page_file_name(42, hash), 10);  // page 23
  const AcquireResult partial = request(1, prompt);
  EXPECT_EQ(partial.disk_hit_tokens, 23 * kP);
  EXPECT_EQ(cache_->stats().disk_loaded_pages, 23u);
  EXPECT_EQ(disk_->stats().refused, 1u);
  const KvCacheStats s = cache_->stats();
  EXPECT_EQ(s.host_pages_used, s.host_pages_cached) << "pages read past the corrupt one were given back";
}

TEST_F(KvCacheDiskTest, KvEventsTellOfPagesTheDiskTierTakesAndEvicts) {
  make(4, 4, 6);  // a disk budget of 6 pages
  test::KvEventIndex events;
  cache_->set_event_sink(&events);
  const auto first = range(100, 16), second = range(200, 16);
  request(1, first);
  request(1, second);
  request(1, range(300, 16));  // first's 4 pages: device -> host -> disk
  EXPECT_EQ(events.held(Tier::Disk), page_hashes_of(1, first));
  request(1, range(400, 16));  // second's go to disk too; the writer evicts 2 of first's for the budget
  request(1, range(500, 16));
  cache_->persist_to_disk();  // everything to disk, then what the writer evicted is published
  std::set<PageHash> on_disk;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    std::uint64_t fingerprint = 0;
    PageHash hash = 0;
    if (parse_page_file_name(e.path().filename().string(), fingerprint, hash)) on_disk.insert(hash);
  }
  EXPECT_EQ(on_disk.size(), 6u);
  EXPECT_EQ(events.held(Tier::Disk), on_disk);
  EXPECT_GE(events.events(KvEvent::Kind::Removed), 1u);
  EXPECT_EQ(events.differs_from(cache_->page_hashes()), "");
  EXPECT_TRUE(events.errors().empty()) << events.errors().front();
  // A page read back from disk is still there: it stays held on disk beside its host copy.
  const std::size_t held = events.held(Tier::Disk).size();
  request(1, range(500, 16));
  EXPECT_EQ(events.held(Tier::Disk).size(), held);
  cache_->set_event_sink(nullptr);
}

TEST_F(KvCacheDiskTest, KvEventsRemoveEveryDiskPageWhenAWriteFailureTurnsTheTierOff) {
  make(4, 4);
  test::KvEventIndex events;
  cache_->set_event_sink(&events);
  request(1, range(100, 16));
  request(1, range(200, 16));
  request(1, range(300, 16));
  disk_->drain();
  EXPECT_EQ(events.held(Tier::Disk).size(), 4u);
  disk_->fail_nth_write(1);
  request(1, range(400, 16));  // its spill fails: the tier turns off
  disk_->drain();
  EXPECT_FALSE(disk_->enabled());
  request(1, range(500, 16));  // the next lookup publishes the removals
  EXPECT_TRUE(events.held(Tier::Disk).empty());
  EXPECT_TRUE(events.errors().empty()) << events.errors().front();
  cache_->set_event_sink(nullptr);
}

}  // namespace
}  // namespace kvtrie
