// The disk tier's index, LRU and writer thread (cache/disk_page_store.h). The file format and its checks
// are in disk_page_file.cpp.
#include "cache/disk_page_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <tuple>
#include <utility>

#include "base/error.h"

namespace kvtrie {
namespace {

double mib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

DiskPageStore::DiskPageStore(DiskPageStoreConfig config) : config_(std::move(config)) {
  KVTRIE_CHECK(config_.page_bytes > 0 && config_.page_tokens > 0, "disk tier of empty pages");
  counters_.budget_bytes = config_.budget_bytes;
  open_directory();
  reader_ = std::make_unique<ParallelFor>(std::max<std::uint32_t>(config_.reader_threads, 1));
  worker_ = std::thread([this] { worker_loop(); });
}

DiskPageStore::~DiskPageStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the directory lock
}

std::filesystem::path DiskPageStore::path_of(const Key& key) const {
  return config_.dir / page_file_name(key.fingerprint, key.hash);
}

void DiskPageStore::open_directory() {
  const std::string dir = config_.dir.string();
  const std::uint64_t file_bytes = page_file_bytes(config_.page_tokens, config_.page_bytes);
  if (config_.budget_bytes < file_bytes) {
    spdlog::warn("kv disk tier off: a budget of {} bytes holds no page of {} bytes", config_.budget_bytes,
                 file_bytes);
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(config_.dir, ec);
  struct stat st {};
  if (ec || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    spdlog::warn("kv disk tier off: cannot create directory {}: {}", dir,
                 ec ? ec.message() : std::strerror(errno));
    return;
  }
  // KV pages reveal prompts: only the service user may list or read them.
  if ((st.st_mode & 0777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
    spdlog::warn("kv disk tier off: cannot make {} private (0700): {}", dir, std::strerror(errno));
    return;
  }
  const std::string lock_path = (config_.dir / ".lock").string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    spdlog::warn("kv disk tier off: {} is in use by another process ({})", dir, std::strerror(errno));
    return;
  }
  scan_directory();
  enabled_ = true;
}

void DiskPageStore::scan_directory() {
  struct Found {
    Key key;
    std::uint64_t bytes;
    std::int64_t mtime_ns;
  };
  std::vector<Found> found;
  std::uint64_t removed = 0;
  const std::uint64_t file_bytes = page_file_bytes(config_.page_tokens, config_.page_bytes);
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(config_.dir, ec)) {
    const std::string name = item.path().filename().string();
    struct stat st {};
    if (::lstat(item.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    Key key{};
    const bool temporary = name.ends_with(kPageFileTempSuffix);
    if (!temporary && !parse_page_file_name(name, key.fingerprint, key.hash)) continue;  // not ours
    // A temporary file is a write a crash interrupted; a page of ours of the wrong size is a torn one.
    if (temporary ||
        (key.fingerprint == config_.fingerprint && static_cast<std::uint64_t>(st.st_size) != file_bytes)) {
      if (::unlink(item.path().c_str()) == 0) ++removed;
      continue;
    }
    found.push_back({key, static_cast<std::uint64_t>(st.st_size),
                     std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  if (ec) spdlog::warn("kv disk tier: listing {} stopped early: {}", config_.dir.string(), ec.message());
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.mtime_ns, a.key) < std::tie(b.mtime_ns, b.key);
  });
  std::unique_lock lock(mutex_);
  for (const Found& f : found) {
    files_[f.key] = {f.bytes, ++tick_};
    lru_.insert({tick_, f.key});
    bytes_on_disk_ += f.bytes;
    if (f.key.fingerprint == config_.fingerprint) ++own_pages_;
  }
  counters_.refused += removed;
  make_room(0, lock);  // the budget may have shrunk since the last run
  spdlog::info("kv disk tier: {}: {} pages of this model, {:.1f} MiB of {:.1f} MiB used{}",
               config_.dir.string(), own_pages_, mib(bytes_on_disk_), mib(config_.budget_bytes),
               removed == 0 ? std::string() : fmt::format(", removed {} incomplete files", removed));
}

bool DiskPageStore::make_room(std::uint64_t incoming, std::unique_lock<std::mutex>& lock) {
  (void)lock;  // held: documents that the index is locked
  if (incoming > config_.budget_bytes) return false;
  while (bytes_on_disk_ + incoming > config_.budget_bytes && !lru_.empty()) {
    const Key victim = lru_.begin()->second;
    if (::unlink(path_of(victim).c_str()) != 0 && errno != ENOENT)
      spdlog::warn("kv disk tier: cannot remove {}: {}", path_of(victim).string(), std::strerror(errno));
    forget(victim);
    ++counters_.evictions;
  }
  return bytes_on_disk_ + incoming <= config_.budget_bytes;
}

void DiskPageStore::touch(const Key& key) {
  auto it = files_.find(key);
  if (it == files_.end()) return;
  lru_.erase({it->second.tick, key});
  it->second.tick = ++tick_;
  lru_.insert({it->second.tick, key});
}

void DiskPageStore::forget(const Key& key) {
  auto it = files_.find(key);
  if (it == files_.end()) return;
  lru_.erase({it->second.tick, key});
  bytes_on_disk_ -= it->second.bytes;
  if (key.fingerprint == config_.fingerprint) {
    --own_pages_;
    removed_.push_back(key.hash);
  }
  files_.erase(it);
}

void DiskPageStore::disable(const std::string& why) {
  if (!enabled_.exchange(false)) return;
  spdlog::error("kv disk tier off until restart: {}", why);
  // Every page is gone as far as this run is concerned (the files stay for the next start).
  for (const auto& [key, entry] : files_)
    if (key.fingerprint == config_.fingerprint) removed_.push_back(key.hash);
  for (const auto& [hash, job] : pending_) removed_.push_back(hash);
  counters_.dropped_writes += queue_.size();
  for (const auto& job : queue_) {
    pending_.erase(job->hash);
    queued_bytes_ -= job->bytes.size();
  }
  queue_.clear();
  work_done_.notify_all();
}

bool DiskPageStore::contains(PageHash hash) const {
  if (!enabled_) return false;
  std::lock_guard lock(mutex_);
  return pending_.contains(hash) || files_.contains(Key{config_.fingerprint, hash});
}

bool DiskPageStore::store(PageHash hash, std::span<const TokenId> tokens, std::span<const std::byte> bytes,
                          bool wait_for_room) {
  KVTRIE_CHECK(tokens.size() == config_.page_tokens && bytes.size() == config_.page_bytes,
               "disk tier store of a page of the wrong shape");
  std::unique_lock lock(mutex_);
  if (wait_for_room)
    work_done_.wait(lock, [&] {
      return !enabled_ || pending_.empty() || queued_bytes_ + bytes.size() <= config_.max_queued_bytes;
    });
  if (!enabled_) {
    ++counters_.dropped_writes;
    return false;
  }
  const Key key{config_.fingerprint, hash};
  if (pending_.contains(hash)) return true;
  if (files_.contains(key)) {
    touch(key);
    return true;
  }
  if (queued_bytes_ + bytes.size() > config_.max_queued_bytes && !(wait_for_room && pending_.empty())) {
    ++counters_.dropped_writes;
    return false;
  }
  auto job =
      std::make_shared<const Job>(Job{hash, {tokens.begin(), tokens.end()}, {bytes.begin(), bytes.end()}});
  queued_bytes_ += bytes.size();
  pending_[hash] = job;
  queue_.push_back(std::move(job));
  work_ready_.notify_one();
  return true;
}

bool DiskPageStore::in_memory(std::span<const PageHash> hashes, std::size_t samples) const {
  if (hashes.empty() || config_.read_delay.count() > 0) return false;
  const std::size_t n = hashes.size(), probes = std::min(n, std::max<std::size_t>(samples, 2));
  for (std::size_t s = 0; s < probes; ++s) {
    const PageHash hash = hashes[probes == 1 ? 0 : s * (n - 1) / (probes - 1)];
    {
      std::lock_guard lock(mutex_);
      if (!enabled_) return false;
      if (pending_.contains(hash)) continue;
    }
    if (!page_file_in_memory(path_of({config_.fingerprint, hash}))) return false;
  }
  return true;
}

DiskLoadStatus DiskPageStore::load(PageHash hash, std::span<const TokenId> tokens, std::span<std::byte> out) {
  KVTRIE_CHECK(tokens.size() == config_.page_tokens && out.size() == config_.page_bytes,
               "disk tier load of a page of the wrong shape");
  if (config_.read_delay.count() > 0) std::this_thread::sleep_for(config_.read_delay);
  const Key key{config_.fingerprint, hash};
  {
    std::lock_guard lock(mutex_);
    if (!enabled_) return DiskLoadStatus::Disabled;
    if (auto it = pending_.find(hash); it != pending_.end()) {
      // Not yet on disk: its queued copy is the page (the same tokens, or it is another prefix's).
      const Job& job = *it->second;
      if (!std::equal(job.tokens.begin(), job.tokens.end(), tokens.begin(), tokens.end()))
        return DiskLoadStatus::Missing;
      std::copy(job.bytes.begin(), job.bytes.end(), out.begin());
      ++counters_.reads;
      counters_.read_bytes += out.size();
      return DiskLoadStatus::Ok;
    }
    if (!files_.contains(key)) return DiskLoadStatus::Missing;
    touch(key);
  }
  const std::filesystem::path path = path_of(key);
  const PageFileResult result =
      read_page_file(path, {config_.fingerprint, hash, tokens, config_.page_bytes}, out);
  std::lock_guard lock(mutex_);
  if (result.ok()) {
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // last use survives a restart as the mtime
    ++counters_.reads;
    counters_.read_bytes += out.size();
    return DiskLoadStatus::Ok;
  }
  if (result.status == PageFileStatus::Missing || result.status == PageFileStatus::IoError) {
    // Removed behind our back, or unreadable now: forget it (a later write may replace it).
    if (result.status == PageFileStatus::IoError) spdlog::warn("kv disk tier: {}", result.message);
    forget(key);
    return DiskLoadStatus::Missing;
  }
  spdlog::warn("kv disk tier: refused and removed a {} page file: {}", page_file_status_name(result.status),
               result.message);
  ::unlink(path.c_str());
  forget(key);
  ++counters_.refused;
  return DiskLoadStatus::Refused;
}

std::size_t DiskPageStore::load_run(std::span<const DiskPageRead> pages, DiskRunProgress* progress) {
  if (!enabled_) return 0;
  std::lock_guard run_lock(run_mutex_);
  std::vector<DiskLoadStatus> status(pages.size(), DiskLoadStatus::Missing);
  std::mutex leading_mutex;  // guards status and leading: pages complete out of order
  std::size_t leading = 0;   // pages [0, leading) loaded Ok
  reader_->run(pages.size(), [&](std::size_t i) {
    if (progress != nullptr && i >= progress->limit.load()) return false;  // this page and those after it
    const DiskLoadStatus loaded = load(pages[i].hash, pages[i].tokens, pages[i].out);
    const std::lock_guard lock(leading_mutex);
    status[i] = loaded;
    while (leading < status.size() && status[leading] == DiskLoadStatus::Ok) ++leading;
    if (progress != nullptr) progress->loaded.store(leading);
    return loaded == DiskLoadStatus::Ok;  // a failed page ends the run: later pages are of no use
  });
  return leading;
}

void DiskPageStore::drain() {
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [&] { return pending_.empty(); });
}

std::vector<PageHash> DiskPageStore::take_removed() {
  std::lock_guard lock(mutex_);
  return std::exchange(removed_, {});
}

DiskPageStoreStats DiskPageStore::stats() const {
  std::lock_guard lock(mutex_);
  DiskPageStoreStats s = counters_;
  s.enabled = enabled_;
  s.pages = own_pages_;
  s.bytes = bytes_on_disk_;
  s.queued_bytes = queued_bytes_;
  return s;
}

void DiskPageStore::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every queued page is written
    std::shared_ptr<const Job> job = std::move(queue_.front());
    queue_.pop_front();
    const std::uint64_t file_bytes = page_file_bytes(config_.page_tokens, config_.page_bytes);
    const bool fits = enabled_ && make_room(file_bytes, lock);
    if (fits) {
      bytes_on_disk_ += file_bytes;  // the temporary file, then the page
      lock.unlock();
      write_one(job);
      lock.lock();
    } else {
      ++counters_.dropped_writes;
      if (enabled_) removed_.push_back(job->hash);  // accepted by store(), then no room after all
    }
    pending_.erase(job->hash);
    queued_bytes_ -= job->bytes.size();
    work_done_.notify_all();
  }
}

void DiskPageStore::write_one(const std::shared_ptr<const Job>& job) {
  const Key key{config_.fingerprint, job->hash};
  const std::uint64_t file_bytes = page_file_bytes(config_.page_tokens, config_.page_bytes);
  bool inject = false;
  if (const std::uint64_t n = fail_countdown_.load(); n != 0) {
    fail_countdown_.store(n - 1);  // only this thread counts down
    inject = n == 1;
  }
  PageFileResult result;
  if (inject)
    result = {PageFileStatus::IoError, "injected write failure: " + std::string(std::strerror(ENOSPC))};
  else
    result = write_page_file(config_.dir, {config_.fingerprint, job->hash, job->tokens, config_.page_bytes},
                             job->bytes);
  std::lock_guard lock(mutex_);
  if (!result.ok()) {
    bytes_on_disk_ -= file_bytes;
    ++counters_.dropped_writes;
    disable(result.message);
    return;
  }
  files_[key] = {file_bytes, ++tick_};
  lru_.insert({tick_, key});
  ++own_pages_;
  ++counters_.writes;
  counters_.write_bytes += file_bytes;
}

}  // namespace kvtrie
