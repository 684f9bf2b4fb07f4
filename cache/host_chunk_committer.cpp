#include "cache/host_chunk_committer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "base/error.h"

namespace kvtrie {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

HostChunkCommitter::HostChunkCommitter(const vk::Device& device, std::vector<std::uint64_t> chunk_bytes,
                                       std::uint32_t ahead)
    : device_(device),
      chunk_bytes_(std::move(chunk_bytes)),
      ahead_(ahead),
      state_(chunk_bytes_.size(), State::Empty),
      chunks_(chunk_bytes_.size()),
      target_(std::min<std::size_t>(ahead, chunk_bytes_.size())) {
  if (ahead_ > 0 && !chunk_bytes_.empty()) thread_ = std::thread([this] { run(); });
}

HostChunkCommitter::~HostChunkCommitter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::size_t HostChunkCommitter::next_wanted() const {
  for (std::size_t i = 0; i < target_; ++i)
    if (state_[i] == State::Empty) return i;
  return chunks_.size();
}

void HostChunkCommitter::used(std::size_t chunk) {
  if (ahead_ == 0) return;
  {
    std::lock_guard lock(mutex_);
    const std::size_t want = std::min(chunk_bytes_.size(), chunk + 1 + ahead_);
    if (want <= target_) return;
    target_ = want;
  }
  changed_.notify_all();
}

void HostChunkCommitter::hold(bool held) {
  {
    std::lock_guard lock(mutex_);
    if (held_ == held) return;
    held_ = held;
  }
  changed_.notify_all();
}

void HostChunkCommitter::wait_caught_up() {
  if (ahead_ == 0) return;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    if (held_ || stopping_) return true;
    for (std::size_t i = 0; i < target_; ++i)
      if (state_[i] == State::Empty || state_[i] == State::Committing) return false;
    return true;
  });
}

vk::Buffer HostChunkCommitter::take(std::size_t chunk) {
  KVTRIE_CHECK(chunk < chunk_bytes_.size(), "host chunk out of range");
  const auto start = std::chrono::steady_clock::now();
  used(chunk);
  std::unique_lock lock(mutex_);
  // A commit in progress is waited for: allocating the chunk a second time would pin it twice meanwhile.
  changed_.wait(lock, [&] { return state_[chunk] != State::Committing; });
  KVTRIE_CHECK(state_[chunk] != State::Taken, "host chunk taken twice");
  vk::Buffer buffer;
  if (state_[chunk] == State::Ready) {
    buffer = std::move(chunks_[chunk]);
  } else {
    state_[chunk] = State::Committing;  // keeps the background thread off it while this thread allocates
    lock.unlock();
    try {
      buffer = vk::Buffer(device_, chunk_bytes_[chunk], vk::MemoryKind::HostCached);
    } catch (...) {
      lock.lock();
      state_[chunk] = State::Failed;
      changed_.notify_all();
      owner_seconds_ += seconds_since(start);
      throw;
    }
    lock.lock();
  }
  state_[chunk] = State::Taken;
  changed_.notify_all();
  owner_seconds_ += seconds_since(start);
  return buffer;
}

void HostChunkCommitter::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || (!held_ && next_wanted() < chunks_.size()); });
    if (stopping_) return;
    const std::size_t chunk = next_wanted();
    state_[chunk] = State::Committing;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    std::optional<vk::Buffer> buffer;
    std::string error = "out of host memory";
    try {
      buffer = vk::Buffer::try_create(device_, chunk_bytes_[chunk], vk::MemoryKind::HostCached);
      // Touch every page now: the first touch of fresh host memory costs a fault per page, which would
      // otherwise fall on the first copies into the chunk (a request's demotions or disk reads).
      if (buffer && buffer->data() != nullptr) std::memset(buffer->data(), 0, chunk_bytes_[chunk]);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const double took = seconds_since(start);
    lock.lock();
    background_seconds_ += took;
    if (buffer) {
      chunks_[chunk] = std::move(*buffer);
      state_[chunk] = State::Ready;
      ++background_commits_;
    } else {
      // Not retried here: the owner allocates a failed chunk on first use, and throws there if the memory
      // is still missing.
      state_[chunk] = State::Failed;
      ++background_failures_;
      if (!std::exchange(logged_failure_, true))
        spdlog::warn("kv host tier: committing chunk {} ahead of use failed ({}); it is committed on use",
                     chunk, error);
    }
    changed_.notify_all();
  }
}

double HostChunkCommitter::background_seconds() const {
  std::lock_guard lock(mutex_);
  return background_seconds_;
}

std::uint32_t HostChunkCommitter::background_commits() const {
  std::lock_guard lock(mutex_);
  return background_commits_;
}

std::uint32_t HostChunkCommitter::background_failures() const {
  std::lock_guard lock(mutex_);
  return background_failures_;
}

}  // namespace kvtrie
