// DiskPageStore and its page files: pages survive a reopen (a restart), other fingerprints are never read,
// damaged files (flipped bytes, truncation, a foreign file under our name, kill -9 mid-write) are refused and
// removed, the byte budget holds with LRU order, and write failures (injected, and a real EFBIG from a file
// size limit) turn the tier off instead of failing callers. A run of pages read with several reads in
// flight (load_run) gives the same pages as reading them one by one, and stops at a corrupt one, refused.
// in_memory() tells a run whose pages are queued or in the page cache from one on the disk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "cache/disk_page_file.h"
#include "cache/disk_page_store.h"
#include "tests/support/paths.h"

namespace kvtrie {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kTokens = 4;
constexpr std::size_t kPageBytes = 1000;
constexpr std::uint64_t kModelA = 0xA11CE, kModelB = 0xB0B;
const std::uint64_t kFileBytes = page_file_bytes(kTokens, kPageBytes);

// Page i of a test: its tokens and bytes are functions of i, so a load can be checked exactly.
std::vector<TokenId> tokens_of(std::uint64_t i) {
  return {static_cast<TokenId>(i), 7, static_cast<TokenId>(i * 3), 11};
}
std::vector<std::byte> bytes_of(std::uint64_t i) {
  std::vector<std::byte> bytes(kPageBytes);
  std::mt19937_64 rng(i);
  for (auto& b : bytes) b = static_cast<std::byte>(rng());
  return bytes;
}
PageHash hash_of(std::uint64_t i) {
  return 0x1000 + i * 0x9E3779B97F4A7C15ULL;
}

fs::path fresh_dir() {
  const fs::path dir = test::scratch_dir() / "kv";
  fs::remove_all(dir);
  return dir;
}

DiskPageStoreConfig config_for(const fs::path& dir, std::uint64_t fingerprint, std::uint64_t pages_budget) {
  DiskPageStoreConfig c;
  c.dir = dir;
  c.fingerprint = fingerprint;
  c.page_tokens = kTokens;
  c.page_bytes = kPageBytes;
  c.budget_bytes = pages_budget * kFileBytes;
  return c;
}

DiskLoadStatus load(DiskPageStore& store, std::uint64_t i, std::vector<std::byte>* out = nullptr) {
  std::vector<std::byte> bytes(kPageBytes);
  const DiskLoadStatus status = store.load(hash_of(i), tokens_of(i), bytes);
  if (status == DiskLoadStatus::Ok) {
    EXPECT_EQ(bytes, bytes_of(i)) << "page " << i << " loaded other bytes";
  }
  if (out != nullptr) *out = bytes;
  return status;
}

void store_page(DiskPageStore& store, std::uint64_t i) {
  EXPECT_TRUE(store.store(hash_of(i), tokens_of(i), bytes_of(i)));
}

fs::path file_of(const fs::path& dir, std::uint64_t fingerprint, std::uint64_t i) {
  return dir / page_file_name(fingerprint, hash_of(i));
}

std::size_t files_named(const fs::path& dir, const std::string& suffix) {
  std::size_t n = 0;
  for (const auto& item : fs::directory_iterator(dir)) n += item.path().string().ends_with(suffix);
  return n;
}

TEST(DiskPageFile, NamesRoundTripAndOthersAreNotOurs) {
  std::uint64_t fingerprint = 0;
  PageHash hash = 0;
  ASSERT_TRUE(parse_page_file_name(page_file_name(0xfeed, 0xdeadbeefcafe), fingerprint, hash));
  EXPECT_EQ(fingerprint, 0xfeedu);
  EXPECT_EQ(hash, 0xdeadbeefcafeu);
  EXPECT_FALSE(parse_page_file_name(page_file_name(1, 2) + ".tmp", fingerprint, hash));
  EXPECT_FALSE(parse_page_file_name(".lock", fingerprint, hash));
  EXPECT_FALSE(parse_page_file_name("000000000000000G-0000000000000000.kvpage", fingerprint, hash));
}

// Regression (found by fuzz/fuzz_disk_page.cpp): read_page_file never looked at the header's 8 reserved
// bytes, so a file with them set and its header checksum recomputed read as Ok, though write_page_file never
// writes such a file.
TEST(DiskPageFile, ReservedHeaderBytesAreRefusedEvenUnderAGoodChecksum) {
  const fs::path dir = fresh_dir();
  fs::create_directories(dir);
  const std::vector<TokenId> tokens = tokens_of(1);
  const PageFileIdentity id{kModelA, hash_of(1), tokens, kPageBytes};
  ASSERT_TRUE(write_page_file(dir, id, bytes_of(1)).ok());
  const fs::path path = file_of(dir, kModelA, 1);
  std::vector<std::byte> out(kPageBytes);
  ASSERT_TRUE(read_page_file(path, id, out).ok());

  std::vector<char> file;
  {
    std::ifstream in(path, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(file.size(), kFileBytes);
  file[48] = 1;  // the reserved field: bytes 48 to 55 of the header, then its checksum at 56
  const std::uint64_t checksum = XXH3_64bits(file.data(), 56);
  std::memcpy(file.data() + 56, &checksum, sizeof checksum);
  std::ofstream(path, std::ios::binary).write(file.data(), static_cast<std::streamsize>(file.size()));
  const PageFileResult result = read_page_file(path, id, out);
  EXPECT_EQ(result.status, PageFileStatus::Corrupt) << result.message;
}

TEST(DiskPageStore, PagesSurviveAReopenInAPrivateDirectory) {
  const fs::path dir = fresh_dir();
  {
    DiskPageStore store(config_for(dir, kModelA, 100));
    ASSERT_TRUE(store.enabled());
    for (std::uint64_t i = 0; i < 10; ++i) store_page(store, i);
    EXPECT_EQ(load(store, 3), DiskLoadStatus::Ok);  // from the queue or the file, whichever it is in now
    store.drain();
    const DiskPageStoreStats s = store.stats();
    EXPECT_EQ(s.pages, 10u);
    EXPECT_EQ(s.writes, 10u);
    EXPECT_EQ(s.bytes, 10 * kFileBytes);
    EXPECT_EQ(s.queued_bytes, 0u);
  }
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(file_of(dir, kModelA, 0)).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  DiskPageStore again(config_for(dir, kModelA, 100));
  EXPECT_EQ(again.stats().pages, 10u);
  for (std::uint64_t i = 0; i < 10; ++i) {
    EXPECT_TRUE(again.contains(hash_of(i)));
    EXPECT_EQ(load(again, i), DiskLoadStatus::Ok);
  }
  EXPECT_FALSE(again.contains(hash_of(10)));
  EXPECT_EQ(load(again, 10), DiskLoadStatus::Missing);
  // The same hash asked with other tokens (a collision) is refused, not loaded.
  std::vector<std::byte> out(kPageBytes);
  EXPECT_EQ(again.load(hash_of(1), tokens_of(2), out), DiskLoadStatus::Refused);
  EXPECT_EQ(again.stats().reads, 10u);
}

TEST(DiskPageStore, AnotherFingerprintNeverReadsThePagesButEvictsThemForItsBudget) {
  const fs::path dir = fresh_dir();
  {
    DiskPageStore a(config_for(dir, kModelA, 4));
    for (std::uint64_t i = 0; i < 4; ++i) store_page(a, i);
  }
  DiskPageStore b(config_for(dir, kModelB, 4));
  EXPECT_EQ(b.stats().pages, 0u);
  EXPECT_EQ(b.stats().bytes, 4 * kFileBytes);  // model A's files count against the shared budget
  EXPECT_FALSE(b.contains(hash_of(0)));
  EXPECT_EQ(load(b, 0), DiskLoadStatus::Missing);
  store_page(b, 100);
  store_page(b, 101);
  b.drain();
  EXPECT_EQ(b.stats().bytes, 4 * kFileBytes);
  EXPECT_EQ(b.stats().evictions, 2u);
  int a_left = 0;
  for (std::uint64_t i = 0; i < 4; ++i) a_left += fs::exists(file_of(dir, kModelA, i));
  EXPECT_EQ(a_left, 2);
  EXPECT_TRUE(fs::exists(file_of(dir, kModelB, 100)));
}

TEST(DiskPageStore, LastUseSurvivesARestartAsTheFilesModificationTime) {
  const fs::path dir = fresh_dir();
  {
    DiskPageStore store(config_for(dir, kModelA, 4));
    for (std::uint64_t i = 0; i < 4; ++i) store_page(store, i);
  }
  // Page 2 was used last, page 0 long ago (as a previous run's reads would have left them).
  const auto now = fs::file_time_type::clock::now();
  for (std::uint64_t i = 0; i < 4; ++i)
    fs::last_write_time(file_of(dir, kModelA, i), now - std::chrono::hours(10 - (i == 2 ? 9 : i)));
  DiskPageStore store(config_for(dir, kModelA, 4));
  store_page(store, 10);
  store_page(store, 11);
  store_page(store, 12);
  store.drain();
  EXPECT_TRUE(fs::exists(file_of(dir, kModelA, 2)));
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, 0)));
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, 1)));
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, 3)));
}

TEST(DiskPageStore, AFlippedByteAnywhereIsRefusedAndRemoved) {
  const fs::path dir = fresh_dir();
  std::mt19937 rng(11);
  for (int round = 0; round < 24; ++round) {
    {
      DiskPageStore store(config_for(dir, kModelA, 100));
      store_page(store, round);
    }
    const fs::path file = file_of(dir, kModelA, round);
    // Header, tokens and KV bytes each get their turn.
    const std::uint64_t where = round % 3 == 0   ? rng() % 64
                                : round % 3 == 1 ? 64 + rng() % (kTokens * 4)
                                                 : 64 + kTokens * 4 + rng() % kPageBytes;
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(where));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ (1 << (rng() % 8)));
    f.seekp(static_cast<std::streamoff>(where));
    f.write(&c, 1);
    f.close();
    DiskPageStore store(config_for(dir, kModelA, 100));
    EXPECT_EQ(load(store, round), DiskLoadStatus::Refused) << "flipped byte " << where;
    EXPECT_FALSE(fs::exists(file));
    EXPECT_EQ(store.stats().refused, 1u);
    EXPECT_EQ(load(store, round), DiskLoadStatus::Missing);  // refused once, then gone
  }
}

TEST(DiskPageStore, TruncatedFilesAreRefusedOnLoadAndRemovedAtOpen) {
  const fs::path dir = fresh_dir();
  std::optional<DiskPageStore> store(std::in_place, config_for(dir, kModelA, 100));
  for (std::uint64_t i = 0; i < 3; ++i) store_page(*store, i);
  store->drain();
  fs::resize_file(file_of(dir, kModelA, 0), kFileBytes - 1);
  EXPECT_EQ(load(*store, 0), DiskLoadStatus::Refused);
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, 0)));
  fs::resize_file(file_of(dir, kModelA, 1), 10);
  std::ofstream(dir / (page_file_name(kModelA, hash_of(7)) + kPageFileTempSuffix)) << "half a page";
  std::ofstream(dir / "README") << "not a page: left alone";
  store.emplace(config_for(dir, kModelA, 100));
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, 1)));  // listed at open: the wrong size is a torn write
  EXPECT_EQ(files_named(dir, ".tmp"), 0u);
  EXPECT_TRUE(fs::exists(dir / "README"));
  EXPECT_EQ(store->stats().pages, 1u);
  EXPECT_EQ(store->stats().refused, 2u);
  EXPECT_EQ(load(*store, 2), DiskLoadStatus::Ok);
}

TEST(DiskPageStore, AFileOfAnotherModelUnderThisModelsNameIsRefused) {
  const fs::path dir = fresh_dir();
  {
    DiskPageStore b(config_for(dir, kModelB, 100));
    store_page(b, 5);
  }
  fs::rename(file_of(dir, kModelB, 5), file_of(dir, kModelA, 5));
  DiskPageStore a(config_for(dir, kModelA, 100));
  EXPECT_TRUE(a.contains(hash_of(5)));
  EXPECT_EQ(load(a, 5), DiskLoadStatus::Refused);
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, 5)));
}

TEST(DiskPageStore, BudgetSmallerThanTheWorkingSetHoldsInLeastRecentlyUsedOrder) {
  const fs::path dir = fresh_dir();
  {
    DiskPageStore store(config_for(dir, kModelA, 5));
    for (std::uint64_t i = 0; i < 5; ++i) store_page(store, i);
    store.drain();
    EXPECT_EQ(load(store, 0), DiskLoadStatus::Ok);  // page 0 is now the most recently used
    for (std::uint64_t i = 5; i < 40; ++i) {
      store_page(store, i);
      if (i == 6) {
        store.drain();
        EXPECT_EQ(load(store, 0), DiskLoadStatus::Ok) << "the page just read was evicted before colder ones";
        EXPECT_EQ(load(store, 1), DiskLoadStatus::Missing);
      }
      EXPECT_LE(store.stats().bytes, 5 * kFileBytes);
    }
    store.drain();
    const DiskPageStoreStats s = store.stats();
    EXPECT_EQ(s.bytes, 5 * kFileBytes);
    EXPECT_EQ(s.pages, 5u);
    EXPECT_EQ(s.evictions, 35u);
    EXPECT_EQ(files_named(dir, ".kvpage"), 5u);
    for (std::uint64_t i = 35; i < 40; ++i) EXPECT_EQ(load(store, i), DiskLoadStatus::Ok);
  }
  // A smaller budget at the next start evicts down to it at once.
  DiskPageStore smaller(config_for(dir, kModelA, 2));
  EXPECT_EQ(smaller.stats().bytes, 2 * kFileBytes);
  EXPECT_EQ(files_named(dir, ".kvpage"), 2u);
}

TEST(DiskPageStore, AnInjectedWriteFailureTurnsTheTierOffAndKeepsWhatWasWritten) {
  const fs::path dir = fresh_dir();
  {
    DiskPageStore store(config_for(dir, kModelA, 100));
    store.fail_nth_write(3);
    for (std::uint64_t i = 0; i < 6; ++i) store.store(hash_of(i), tokens_of(i), bytes_of(i));
    store.drain();
    EXPECT_FALSE(store.enabled());
    const DiskPageStoreStats s = store.stats();
    EXPECT_EQ(s.writes, 2u);
    EXPECT_EQ(s.writes + s.dropped_writes, 6u);
    EXPECT_EQ(s.bytes, 2 * kFileBytes);
    EXPECT_EQ(files_named(dir, ".tmp"), 0u);
    EXPECT_FALSE(store.store(hash_of(9), tokens_of(9), bytes_of(9)));
    EXPECT_FALSE(store.contains(hash_of(0)));
    EXPECT_EQ(load(store, 0), DiskLoadStatus::Disabled);
  }
  DiskPageStore again(config_for(dir, kModelA, 100));  // the next start uses the pages written before
  EXPECT_TRUE(again.enabled());
  EXPECT_EQ(load(again, 0), DiskLoadStatus::Ok);
  EXPECT_EQ(load(again, 1), DiskLoadStatus::Ok);
}

// Runs body in a child process and returns its exit status (the body's own threads die with it).
int in_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(DiskPageStore, ARealWriteFailureTurnsTheTierOffWithoutFailingTheCaller) {
  // A file size limit below one page file makes the kernel fail the write with EFBIG, as a full disk would
  // with ENOSPC.
  const fs::path dir = fresh_dir();
  const int status = in_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{kFileBytes / 2, kFileBytes / 2};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    DiskPageStore store(config_for(dir, kModelA, 100));
    if (!store.enabled()) return 3;
    store_page(store, 0);
    store.drain();
    const DiskPageStoreStats s = store.stats();
    return !store.enabled() && s.writes == 0 && s.bytes == 0 && load(store, 0) == DiskLoadStatus::Disabled
               ? 0
               : 4;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(files_named(dir, ".tmp"), 0u);
  EXPECT_EQ(files_named(dir, ".kvpage"), 0u);
}

TEST(DiskPageStore, ASecondStoreOnTheSameDirectoryIsOff) {
  const fs::path dir = fresh_dir();
  DiskPageStore first(config_for(dir, kModelA, 10));
  DiskPageStore second(config_for(dir, kModelA, 10));
  EXPECT_TRUE(first.enabled());
  EXPECT_FALSE(second.enabled());
  EXPECT_FALSE(second.store(hash_of(0), tokens_of(0), bytes_of(0)));
}

TEST(DiskPageStore, KillNineAtRandomMomentsLeavesOnlyWholePagesOrNothing) {
  // A writer process is killed with SIGKILL at a random moment, many times over the same directory; each
  // reopen must find only pages that load exactly, remove what is incomplete, and keep the budget.
  const fs::path dir = fresh_dir();
  std::mt19937 rng(5);
  constexpr std::uint64_t kBudgetPages = 30;
  for (int round = 0; round < 25; ++round) {
    const pid_t pid = fork();
    if (pid == 0) {
      DiskPageStore store(config_for(dir, kModelA, kBudgetPages));
      for (std::uint64_t i = 0;; ++i) {
        store.store(hash_of(i % 60), tokens_of(i % 60), bytes_of(i % 60));
        if (i % 8 == 7) store.drain();
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 20000));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    // Damage a random file the way a torn write on power loss would, now and then. A child killed before it
    // created the directory leaves none (seen under ThreadSanitizer, whose forked child starts slowly).
    std::vector<fs::path> pages;
    std::error_code no_directory;
    for (const auto& item : fs::directory_iterator(dir, no_directory))
      if (item.path().string().ends_with(".kvpage")) pages.push_back(item.path());
    if (!pages.empty() && round % 3 == 0) fs::resize_file(pages[rng() % pages.size()], rng() % kFileBytes);
    if (!pages.empty() && round % 3 == 1) {
      std::fstream f(pages[rng() % pages.size()], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(rng() % kFileBytes));
      f.put('\x5a');  // may equal the byte that was there: then the page is still whole
    }
    DiskPageStore store(config_for(dir, kModelA, kBudgetPages));
    ASSERT_TRUE(store.enabled());
    EXPECT_EQ(files_named(dir, ".tmp"), 0u);
    EXPECT_LE(store.stats().bytes, kBudgetPages * kFileBytes);
    for (std::uint64_t i = 0; i < 60; ++i) {
      const DiskLoadStatus status = load(store, i);  // checks the bytes of every page it loads
      EXPECT_NE(status, DiskLoadStatus::Disabled);
    }
  }
}

TEST(DiskPageStore, ReadersOnOtherThreadsWhileTheWriterWrites) {
  const fs::path dir = fresh_dir();
  DiskPageStore store(config_for(dir, kModelA, 20));
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&, t] {
      std::mt19937 rng(t);
      while (!done) {
        const DiskLoadStatus status = load(store, rng() % 50);  // bytes checked when Ok
        EXPECT_NE(status, DiskLoadStatus::Refused);
      }
    });
  for (std::uint64_t i = 0; i < 200; ++i) store.store(hash_of(i % 50), tokens_of(i % 50), bytes_of(i % 50));
  store.drain();
  done = true;
  for (auto& r : readers) r.join();
  EXPECT_LE(store.stats().bytes, 20 * kFileBytes);
}

// A run of pages (a prompt's) read with several reads in flight into the caller's buffers.
struct PageRun {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::vector<std::byte>> out;
  std::vector<DiskPageRead> reads;
  explicit PageRun(std::uint64_t pages) : tokens(pages), out(pages, std::vector<std::byte>(kPageBytes)) {
    for (std::uint64_t i = 0; i < pages; ++i) {
      tokens[i] = tokens_of(i);
      reads.push_back({hash_of(i), tokens[i], out[i]});
    }
  }
};

TEST(DiskPageStore, ARunReadInParallelGivesTheSamePagesAsOneByOne) {
  const fs::path dir = fresh_dir();
  constexpr std::uint64_t kPages = 37;  // not a multiple of the readers
  {
    DiskPageStore store(config_for(dir, kModelA, 100));
    for (std::uint64_t i = 0; i < kPages; ++i) store_page(store, i);
    store.drain();
  }
  for (std::uint32_t readers : {1u, 4u, 8u}) {
    DiskPageStoreConfig c = config_for(dir, kModelA, 100);
    c.reader_threads = readers;
    DiskPageStore store(c);
    PageRun run(kPages);
    EXPECT_EQ(store.load_run(run.reads), kPages) << readers << " readers";
    for (std::uint64_t i = 0; i < kPages; ++i) EXPECT_EQ(run.out[i], bytes_of(i)) << "page " << i;
    EXPECT_EQ(store.stats().reads, kPages);
    EXPECT_EQ(store.stats().refused, 0u);
  }
}

TEST(DiskPageStore, ARunStopsAtACorruptPageWhichIsRefusedAndRemoved) {
  const fs::path dir = fresh_dir();
  constexpr std::uint64_t kPages = 29, kBad = 13;
  {
    DiskPageStore store(config_for(dir, kModelA, 100));
    for (std::uint64_t i = 0; i < kPages; ++i) store_page(store, i);
    store.drain();
  }
  {
    // One flipped bit in the KV bytes of page 13.
    std::fstream f(file_of(dir, kModelA, kBad), std::ios::in | std::ios::out | std::ios::binary);
    const auto where = static_cast<std::streamoff>(kFileBytes - kPageBytes / 2);
    f.seekg(where);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(where);
    f.write(&c, 1);
  }
  DiskPageStoreConfig c = config_for(dir, kModelA, 100);
  c.reader_threads = 4;
  DiskPageStore store(c);
  PageRun run(kPages);
  EXPECT_EQ(store.load_run(run.reads), kBad);
  for (std::uint64_t i = 0; i < kBad; ++i) EXPECT_EQ(run.out[i], bytes_of(i)) << "page " << i;
  EXPECT_FALSE(fs::exists(file_of(dir, kModelA, kBad)));
  EXPECT_EQ(store.stats().refused, 1u);
  EXPECT_FALSE(store.contains(hash_of(kBad)));
  // Pages past it are intact (at most read for nothing), and the run now ends where the page is missing.
  EXPECT_TRUE(fs::exists(file_of(dir, kModelA, kBad + 1)));
  PageRun again(kPages);
  EXPECT_EQ(store.load_run(again.reads), kBad);
  EXPECT_EQ(store.stats().refused, 1u);
}

// Drops a file's bytes from the OS page cache (written back first), as a reboot would.
void drop_from_page_cache(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  EXPECT_EQ(::fdatasync(fd), 0);
  EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
}

// The scheduler reads a run whole when it is in memory (a service restart finds the files just written in
// the page cache) and computes beside the read otherwise: in_memory() tells, for queued pages and files.
TEST(DiskPageStore, ARunIsInMemoryWhileItsPagesAreQueuedOrInThePageCache) {
  const fs::path dir = fresh_dir();
  constexpr std::uint64_t kPages = 9;
  std::vector<PageHash> hashes;
  for (std::uint64_t i = 0; i < kPages; ++i) hashes.push_back(hash_of(i));
  {
    DiskPageStore store(config_for(dir, kModelA, 100));
    EXPECT_FALSE(store.in_memory(hashes)) << "nothing stored";
    EXPECT_FALSE(store.in_memory({})) << "an empty run";
    for (std::uint64_t i = 0; i < kPages; ++i) store_page(store, i);
    EXPECT_TRUE(store.in_memory(hashes)) << "queued or just written";
    store.drain();
    EXPECT_TRUE(store.in_memory(hashes)) << "just written: in the page cache";
  }
  {
    // An injected read delay is a slow disk: nothing is in memory there.
    DiskPageStoreConfig slow = config_for(dir, kModelA, 100);
    slow.read_delay = std::chrono::milliseconds(1);
    EXPECT_FALSE(DiskPageStore(slow).in_memory(hashes));
  }
  DiskPageStore store(config_for(dir, kModelA, 100));
  EXPECT_TRUE(store.in_memory(hashes)) << "a restart finds them in the page cache";
  drop_from_page_cache(file_of(dir, kModelA, 4));
  if (page_file_in_memory(file_of(dir, kModelA, 4)))
    GTEST_SKIP() << "this file system keeps " << dir << " in memory whatever is dropped (tmpfs?)";
  EXPECT_FALSE(store.in_memory(hashes)) << "page 4 is on the disk only";
  EXPECT_TRUE(store.in_memory(std::span(hashes).first(4))) << "pages 0-3 are still in memory";
  EXPECT_EQ(load(store, 4), DiskLoadStatus::Ok);
  EXPECT_TRUE(store.in_memory(hashes)) << "read once, page 4 is in the page cache again";
}

TEST(DiskPageStore, ARunOnADisabledTierLoadsNothing) {
  const fs::path dir = fresh_dir();
  DiskPageStore first(config_for(dir, kModelA, 100));
  store_page(first, 0);
  first.drain();
  DiskPageStore second(config_for(dir, kModelA, 100));  // the directory is locked: off
  ASSERT_FALSE(second.enabled());
  PageRun run(1);
  EXPECT_EQ(second.load_run(run.reads), 0u);
  EXPECT_EQ(first.load_run(run.reads), 1u);
}

}  // namespace
}  // namespace kvtrie
