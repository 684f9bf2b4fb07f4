// promote and disk-read: the cache tiers' speed through the real code paths (issue 11).
// promote: a prompt's host pages back to the device through KvCache::acquire + sync over VkPageStore, as a
// host-tier hit does (the device tier full of another prompt, so room is made by demoting it first), with
// the host tier cold (every chunk committed on first use) and with chunks committed ahead in the background;
// then once more with every chunk warm; and, with --disk-dir, a disk hit after a "restart" (a new store,
// cache and disk tier over the directory, its page cache dropped).
// disk-read: DiskPageStore::load_run of N page files per reader count against a plain sequential read of
// the same files, the page cache dropped before each.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "cache/disk_page_store.h"
#include "cache/kv_cache.h"
#include "cache/page_hash.h"
#include "cache/vk_page_store.h"
#include "kernels/vk/context.h"

namespace kvtrie::bench {

using Clock = std::chrono::steady_clock;

namespace {

// Writes back and drops the page cache of every file in dir, so the next read comes from the disk. False
// when the kernel refused (the numbers then measure memory).
bool drop_page_cache(const std::filesystem::path& dir) {
  bool ok = true;
  for (const auto& item : std::filesystem::directory_iterator(dir)) {
    const int fd = ::open(item.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ok = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && ok;
    ::close(fd);
  }
  return ok;
}

// Reads every page file of dir whole, one after another, as `cat` would: the disk's sequential speed.
double plain_read_seconds(const std::filesystem::path& dir, uint64_t* bytes) {
  std::vector<char> buffer(8u << 20);
  *bytes = 0;
  const auto start = Clock::now();
  for (const auto& item : std::filesystem::directory_iterator(dir)) {
    if (item.path().extension() != ".kvpage") continue;
    const int fd = ::open(item.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) *bytes += static_cast<uint64_t>(n);
    ::close(fd);
  }
  return seconds_since(start);
}

std::vector<int32_t> prompt(uint32_t pages, uint32_t page_tokens, uint64_t seed) {
  return pseudo_random_tokens(pages * page_tokens + 1, seed, 32000);
}

// The prompt's KV is "computed" (pages reserved and committed, their bytes whatever the device holds).
void fill(KvCache& cache, const std::vector<int32_t>& tokens) {
  const AcquireResult r = cache.acquire(1, tokens);
  cache.sync();
  KVTRIE_CHECK(cache.reserve(r.seq, static_cast<uint32_t>(tokens.size())) == ReserveStatus::Ok,
               "bench: no device room for the prompt");
  cache.commit(r.seq, std::span(tokens).subspan(r.cached_tokens));
  cache.release(r.seq);
}

// Waits until the background committer has stopped committing (the daemon has idle time between
// requests; the bench gives it the same).
void settle(const VkPageStore& store) {
  uint32_t seen = store.committer().background_commits();
  for (int quiet = 0; quiet < 5;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint32_t now = store.committer().background_commits();
    quiet = now == seen ? quiet + 1 : 0;
    seen = now;
  }
}

struct HitTiming {
  double seconds = 0;
  double commit_seconds = 0;  // of which the engine thread spent committing host chunks
  AcquireResult hit;
  uint64_t copy_commands = 0;
};

// acquire + sync of tokens: what a request's TTFT pays before its one computed token.
HitTiming time_hit(KvCache& cache, VkPageStore& store, const std::vector<int32_t>& tokens) {
  HitTiming t;
  const double commit_before = store.host_commit_seconds();
  const uint64_t commands_before = store.copy_commands();
  const auto start = Clock::now();
  t.hit = cache.acquire(1, tokens);
  cache.sync();
  t.seconds = seconds_since(start);
  t.commit_seconds = store.host_commit_seconds() - commit_before;
  t.copy_commands = store.copy_commands() - commands_before;
  cache.release(t.hit.seq);
  cache.sync();
  return t;
}

void emit_hit(const char* leg, const vk::Context& ctx, const PromoteOptions& o, uint64_t ahead_bytes,
              const HitTiming& t, uint64_t page_bytes) {
  const uint64_t moved = uint64_t{t.hit.host_hit_tokens + t.hit.disk_hit_tokens} / o.page_tokens * page_bytes;
  Row("promote")
      .text("device", ctx.device().info().name)
      .text("leg", leg)
      .num("commit_ahead_mib", static_cast<double>(ahead_bytes) / (1 << 20))
      .integer("prompt_pages", o.pages)
      .integer("device_hit_tokens", t.hit.device_hit_tokens)
      .integer("host_hit_tokens", t.hit.host_hit_tokens)
      .integer("disk_hit_tokens", t.hit.disk_hit_tokens)
      .num("ms", t.seconds * 1e3)
      .num("host_commit_ms", t.commit_seconds * 1e3)
      .integer("copy_commands", static_cast<int64_t>(t.copy_commands))
      .num("gbs", static_cast<double>(moved) / t.seconds / 1e9)
      .emit();
}

}  // namespace

void run_promote(const CommonOptions& common, const PromoteOptions& o) {
  vk::Context ctx(context_options(common));
  const kernels::KvLayout layout{o.layers, o.page_tokens, o.kv_dim};
  const uint64_t page_bytes = layout.page_bytes();
  // As the measured daemon: the device tier holds one prompt and a quarter, the host tier three.
  const uint32_t device_pages = o.pages + o.pages / 4, host_pages = 3 * o.pages;
  const KvCacheConfig config{o.page_tokens, page_bytes, device_pages * page_bytes, host_pages * page_bytes};
  const std::vector<int32_t> a = prompt(o.pages, o.page_tokens, 1), b = prompt(o.pages, o.page_tokens, 2);
  // As the engine: one prompt's KV committed ahead, unless told otherwise.
  const uint64_t ahead = o.commit_ahead_mib ? o.commit_ahead_mib << 20 : uint64_t{o.pages} * page_bytes;
  for (const uint64_t ahead_bytes : {uint64_t{0}, ahead}) {
    for (uint32_t rep = 0; rep < common.repeats; ++rep) {
      VkPageStoreOptions so;
      so.host_commit_ahead_bytes = ahead_bytes;
      VkPageStore store(ctx, layout, device_pages, host_pages, so);
      KvCache cache(config, store);
      fill(cache, a);
      fill(cache, b);  // pushes most of a to the host tier
      settle(store);
      emit_hit("host_hit", ctx, o, ahead_bytes, time_hit(cache, store, a), page_bytes);
      // b went to the host tier into chunks committed by now: the steady state.
      emit_hit("host_hit_warm", ctx, o, ahead_bytes, time_hit(cache, store, b), page_bytes);
    }
  }
  if (o.disk_dir.empty()) return;
  DiskPageStoreConfig dc;
  dc.dir = o.disk_dir;
  dc.budget_bytes = 2 * uint64_t{o.pages} * (page_bytes + 4096);
  dc.fingerprint = 0x6b767472696562;  // the bench's own pages
  dc.page_tokens = o.page_tokens;
  dc.page_bytes = page_bytes;
  dc.reader_threads = o.readers;
  {
    VkPageStore store(ctx, layout, device_pages, host_pages);
    DiskPageStore disk(dc);
    KvCache cache(config, store);
    cache.attach_disk_tier(disk, store);
    fill(cache, a);
    cache.persist_to_disk();
  }
  for (uint32_t rep = 0; rep < common.repeats; ++rep) {
    const bool dropped = drop_page_cache(o.disk_dir);
    VkPageStoreOptions so;
    so.host_commit_ahead_bytes = ahead;
    VkPageStore store(ctx, layout, device_pages, host_pages, so);
    DiskPageStore disk(dc);
    KvCache cache(config, store);
    cache.attach_disk_tier(disk, store);
    settle(store);
    const HitTiming t = time_hit(cache, store, a);
    emit_hit(dropped ? "disk_hit" : "disk_hit_page_cache_kept", ctx, o, ahead, t, page_bytes);
  }
}

void run_disk_read(const CommonOptions& common, const DiskReadOptions& o) {
  KVTRIE_CHECK(!o.dir.empty(), "disk-read needs --dir");
  const kernels::KvLayout layout{o.layers, o.page_tokens, o.kv_dim};
  DiskPageStoreConfig dc;
  dc.dir = o.dir;
  dc.budget_bytes = 2 * uint64_t{o.pages} * (layout.page_bytes() + 4096);
  dc.fingerprint = 0x6b767472696563;
  dc.page_tokens = o.page_tokens;
  dc.page_bytes = layout.page_bytes();
  // Pages of random bytes (XXH3 does not care, but a compressing file system would), chained like a prompt.
  std::vector<DiskPageRead> reads(o.pages);
  std::vector<std::vector<int32_t>> tokens(o.pages);
  std::vector<std::byte> memory(uint64_t{o.pages} * layout.page_bytes());
  {
    std::mt19937_64 rng(7);
    for (auto& word : std::span(reinterpret_cast<uint64_t*>(memory.data()), memory.size() / 8)) word = rng();
    DiskPageStore disk(dc);
    PageHash hash = namespace_page_seed(1);
    const std::vector<int32_t> all = pseudo_random_tokens(o.pages * o.page_tokens, 3, 32000);
    for (uint32_t i = 0; i < o.pages; ++i) {
      tokens[i].assign(all.begin() + i * o.page_tokens, all.begin() + (i + 1) * o.page_tokens);
      hash = chain_page_hash(hash, tokens[i]);
      const std::span<std::byte> bytes(memory.data() + uint64_t{i} * layout.page_bytes(),
                                       layout.page_bytes());
      KVTRIE_CHECK(disk.store(hash, tokens[i], bytes, true), "disk-read: the page was not stored");
      reads[i] = {hash, tokens[i], bytes};
    }
    disk.drain();
  }
  const uint64_t bytes = uint64_t{o.pages} * page_file_bytes(o.page_tokens, layout.page_bytes());
  for (const uint32_t readers : parse_numbers(o.readers)) {
    std::vector<double> tier, plain;
    bool dropped = true;
    for (uint32_t rep = 0; rep < common.repeats; ++rep) {
      dc.reader_threads = readers;
      DiskPageStore disk(dc);
      dropped = drop_page_cache(o.dir) && dropped;
      const auto start = Clock::now();
      const size_t loaded = disk.load_run(reads);
      tier.push_back(seconds_since(start));
      KVTRIE_CHECK(loaded == reads.size(), "disk-read: a page did not load");
      dropped = drop_page_cache(o.dir) && dropped;
      uint64_t plain_bytes = 0;
      plain.push_back(plain_read_seconds(o.dir, &plain_bytes));
    }
    Row("disk_read")
        .text("dir", o.dir.string())
        .integer("pages", o.pages)
        .integer("readers", readers)
        .integer("bytes", static_cast<int64_t>(bytes))
        .text("page_cache_dropped", dropped ? "yes" : "no")
        .num("tier_ms", median(tier) * 1e3)
        .num("tier_gbs", static_cast<double>(bytes) / median(tier) / 1e9)
        .num("plain_ms", median(plain) * 1e3)
        .num("plain_gbs", static_cast<double>(bytes) / median(plain) / 1e9)
        .emit();
  }
  if (!o.keep)
    for (const auto& item : std::filesystem::directory_iterator(o.dir))
      if (item.path().extension() == ".kvpage") std::filesystem::remove(item.path());
}

}  // namespace kvtrie::bench
