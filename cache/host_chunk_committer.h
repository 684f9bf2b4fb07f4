// Contract: HostChunkCommitter allocates the host tier's chunks (host-cached vk::Buffers, one per chunk of
// VkPageStore's host tier) ahead of their first use, on a background thread of its own. Allocating
// host-visible memory pins it, which costs about as much as copying it (a 256 MiB chunk takes tens of ms on
// NVIDIA drivers): committed on first use, a host-tier hit that demotes into fresh chunks, or a disk hit
// that reads into them, paid that on the engine thread inside the request's TTFT. With `ahead` > 0 the
// thread keeps the `ahead` chunks past the highest chunk used so far committed (chunks fill from the lowest
// page ids up: the page pool hands out fresh pages in ascending order), and commits the first `ahead` at
// once; with 0 no thread runs and every chunk is committed on first use, as before. While held (hold()),
// the thread starts no commit: pinning host memory slows the GPU work beside it, so the owner holds commits
// while work that must be fast runs (a disk hit computing beside its read); take() still commits on use.
// A background allocation that fails (out of memory) is logged once and left for the owner to retry (and
// then throw). Ownership: a chunk's buffer belongs to the committer until take() moves it to the caller.
// Threads: take(), used() and the counters are called from one owner thread (VkPageStore's); the committer's
// own thread only allocates. The Device must outlive it; the destructor stops and joins the thread (it waits
// for the allocation in progress) and frees the buffers never taken.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/vk/buffer.h"

namespace kvtrie {
namespace vk {
class Device;
}

class HostChunkCommitter {
 public:
  // chunk_bytes: the size of each chunk, in chunk order.
  HostChunkCommitter(const vk::Device& device, std::vector<std::uint64_t> chunk_bytes, std::uint32_t ahead);
  ~HostChunkCommitter();
  HostChunkCommitter(const HostChunkCommitter&) = delete;
  HostChunkCommitter& operator=(const HostChunkCommitter&) = delete;

  // The chunk's buffer, moved to the caller: committed in the background already, or after waiting for the
  // background commit in progress, or allocated now. Once per chunk. Throws kvtrie::Error when the
  // allocation fails. Also counts as a use of the chunk (used()).
  vk::Buffer take(std::size_t chunk);
  // A page of `chunk` is in use: keep `ahead` chunks past it committed.
  void used(std::size_t chunk);
  // Held, the background thread starts no commit (the one in progress finishes); released, it catches up.
  void hold(bool held);
  // Blocks until the background thread has committed (or failed) every chunk it wants now: at load, so that
  // the first requests (a disk hit after a restart reads into these chunks) run beside no pinning. Returns
  // at once when held or without a thread.
  void wait_caught_up();

  // Seconds the owner thread spent in take() (allocating, or waiting for the background allocation): the
  // commit cost requests still pay. And seconds the background thread spent allocating.
  double owner_seconds() const { return owner_seconds_; }
  double background_seconds() const;
  // Chunks the background thread committed so far (taken or not), and the allocations it saw fail.
  std::uint32_t background_commits() const;
  std::uint32_t background_failures() const;

 private:
  enum class State { Empty, Committing, Ready, Taken, Failed };
  void run();
  // The lowest chunk below target_ still Empty (chunks_.size(): none). Caller holds mutex_.
  std::size_t next_wanted() const;

  const vk::Device& device_;
  const std::vector<std::uint64_t> chunk_bytes_;
  const std::uint32_t ahead_;
  double owner_seconds_ = 0;  // owner thread only

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<State> state_;        // per chunk
  std::vector<vk::Buffer> chunks_;  // per chunk: valid while Ready
  std::size_t target_ = 0;          // commit every chunk below this in the background
  bool stopping_ = false;
  bool held_ = false;
  bool logged_failure_ = false;
  double background_seconds_ = 0;
  std::uint32_t background_commits_ = 0;
  std::uint32_t background_failures_ = 0;
  std::thread thread_;  // last: started once every member above exists
};

}  // namespace kvtrie
