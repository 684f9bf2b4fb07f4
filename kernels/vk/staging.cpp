#include "kernels/vk/staging.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"

namespace kvtrie::vk {
namespace {

// Pieces smaller than this are copied by the calling thread alone (threads cost more than they save).
constexpr uint64_t kParallelCopyMin = 4ull << 20;
// One-off transfers go through a staging buffer of at most this size.
constexpr uint64_t kOneOffChunk = 64ull << 20;

uint64_t align16(uint64_t n) {
  return (n + 15) / 16 * 16;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// A few host threads that copy the parts of one large piece together; the caller copies the first part.
class CopyPool {
 public:
  explicit CopyPool(unsigned helpers) {
    for (unsigned i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
  }
  ~CopyPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  CopyPool(const CopyPool&) = delete;
  CopyPool& operator=(const CopyPool&) = delete;

  void copy(std::byte* dst, const std::byte* src, uint64_t n) {
    {
      std::lock_guard lock(mutex_);
      dst_ = dst;
      src_ = src;
      n_ = n;
      pending_ = threads_.size();
      ++generation_;
    }
    wake_.notify_all();
    part(0, dst, src, n);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void part(size_t index, std::byte* dst, const std::byte* src, uint64_t n) const {
    const uint64_t parts = threads_.size() + 1;
    const uint64_t per = align16((n + parts - 1) / parts);
    const uint64_t begin = std::min(n, index * per);
    const uint64_t end = std::min(n, begin + per);
    if (end > begin) std::memcpy(dst + begin, src + begin, end - begin);
  }
  void loop(size_t index) {
    uint64_t seen = 0;
    for (;;) {
      std::byte* dst;
      const std::byte* src;
      uint64_t n;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        dst = dst_;
        src = src_;
        n = n_;
      }
      part(index, dst, src, n);
      {
        std::lock_guard lock(mutex_);
        --pending_;
      }
      done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::byte* dst_ = nullptr;
  const std::byte* src_ = nullptr;
  uint64_t n_ = 0;
  size_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last: joined in the destructor before the state above goes
};

struct Uploader::Slot {
  struct Copy {
    uint64_t src_offset;
    BufferView dst;
  };
  Slot(Context& context, uint64_t bytes)
      : staging(context.device(), bytes, MemoryKind::HostCoherent), recorder(context, QueueKind::Transfer) {}
  Buffer staging;
  CommandRecorder recorder;
  std::vector<Copy> copies;
  uint64_t used = 0;
};

Uploader::Uploader(Context& context, UploaderOptions options) : context_(context), options_(options) {
  KVTRIE_CHECK(options_.slot_bytes >= 16 && options_.slots >= 1, "an empty staging ring");
  options_.slot_bytes = align16(options_.slot_bytes);
  if (options_.copy_threads == 0)
    options_.copy_threads = std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u);
}

Uploader::~Uploader() {
  try {
    finish();
  } catch (const std::exception& e) {
    spdlog::error("vulkan: finishing uploads at teardown failed: {}", e.what());
  }
}

Uploader::Slot& Uploader::current() {
  if (current_ == slots_.size()) slots_.push_back(std::make_unique<Slot>(context_, options_.slot_bytes));
  Slot& slot = *slots_[current_];
  if (slot.recorder.in_flight()) {
    const auto start = std::chrono::steady_clock::now();
    slot.recorder.wait();
    wait_ms_ += ms_since(start);
    slot.copies.clear();
    slot.used = 0;
  }
  return slot;
}

void Uploader::submit_current() {
  if (current_ == slots_.size()) return;  // not allocated: nothing staged
  Slot& slot = *slots_[current_];
  if (slot.copies.empty()) return;
  slot.staging.flush();
  slot.recorder.begin();
  for (const Slot::Copy& c : slot.copies)
    slot.recorder.copy(slot.staging.view(c.src_offset, c.dst.range), c.dst);
  slot.recorder.end();
  slot.recorder.submit();
  ++submissions_;
  current_ = (current_ + 1) % options_.slots;
}

void Uploader::copy_in(std::byte* dst, const std::byte* src, uint64_t n) {
  if (n < kParallelCopyMin || options_.copy_threads <= 1) {
    std::memcpy(dst, src, n);
    return;
  }
  // Started on the first large piece only, so small uploads never start threads.
  if (!pool_) pool_ = std::make_unique<CopyPool>(options_.copy_threads - 1);
  pool_->copy(dst, src, n);
}

void Uploader::upload(const Buffer& dst, uint64_t dst_offset, std::span<const std::byte> data) {
  KVTRIE_CHECK(dst_offset <= dst.size() && data.size() <= dst.size() - dst_offset,
               "upload past the buffer end");
  if (data.empty()) return;
  if (dst.data() != nullptr) {
    std::memcpy(static_cast<std::byte*>(dst.data()) + dst_offset, data.data(), data.size());
    dst.flush();
    bytes_ += data.size();
    return;
  }
  for (uint64_t done = 0; done < data.size();) {
    Slot& slot = current();
    if (slot.used == options_.slot_bytes) {
      submit_current();
      continue;
    }
    const uint64_t n = std::min(options_.slot_bytes - slot.used, data.size() - done);
    const auto start = std::chrono::steady_clock::now();
    copy_in(static_cast<std::byte*>(slot.staging.data()) + slot.used, data.data() + done, n);
    copy_ms_ += ms_since(start);
    slot.copies.push_back({slot.used, dst.view(dst_offset + done, n)});
    slot.used = std::min(options_.slot_bytes, align16(slot.used + n));
    done += n;
    bytes_ += n;
  }
}

void Uploader::finish() {
  submit_current();
  const auto start = std::chrono::steady_clock::now();
  for (std::unique_ptr<Slot>& slot : slots_) {
    slot->recorder.wait();
    slot->copies.clear();
    slot->used = 0;
  }
  wait_ms_ += ms_since(start);
}

void upload(Context& context, const Buffer& dst, uint64_t dst_offset, std::span<const std::byte> data) {
  if (dst.data() != nullptr || data.empty()) {
    Uploader(context, {16, 1, 1}).upload(dst, dst_offset, data);  // mapped: no staging is allocated
    return;
  }
  // Two slots: a transfer larger than one slot fills the second while the first is copied.
  Uploader uploader(context, {std::min<uint64_t>(kOneOffChunk, align16(data.size())), 2, 1});
  uploader.upload(dst, dst_offset, data);
  uploader.finish();
}

void download(Context& context, const Buffer& src, uint64_t src_offset, std::span<std::byte> out) {
  KVTRIE_CHECK(src_offset <= src.size() && out.size() <= src.size() - src_offset,
               "download past the buffer end");
  if (out.empty()) return;
  if (src.data() != nullptr) {
    src.invalidate();
    std::memcpy(out.data(), static_cast<const std::byte*>(src.data()) + src_offset, out.size());
    return;
  }
  const uint64_t chunk = std::min<uint64_t>(kOneOffChunk, out.size());
  Buffer staging(context.device(), chunk, MemoryKind::HostCached);
  CommandRecorder recorder(context, QueueKind::Transfer);
  for (uint64_t done = 0; done < out.size(); done += chunk) {
    const uint64_t n = std::min<uint64_t>(chunk, out.size() - done);
    recorder.begin();
    recorder.copy(src.view(src_offset + done, n), staging.view(0, n));
    recorder.end();
    recorder.submit_and_wait();
    staging.invalidate();
    std::memcpy(out.data() + done, staging.data(), n);
  }
}

}  // namespace kvtrie::vk
