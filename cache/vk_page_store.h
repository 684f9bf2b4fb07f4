// Contract: VkPageStore owns the memory behind the two page pools: the device tier (device-local, bound by
// attention and kv_write, split into chunks of whole pages so that one chunk fits one shader binding,
// maxStorageBufferRange) and the host tier (host-visible, host-cached, in chunks of about
// VkPageStoreOptions::host_chunk_bytes). The device tier is allocated in the constructor. The host tier is
// committed lazily: a host chunk is allocated by the time a copy (or page()) first touches one of its pages,
// so a large host budget costs nothing at load; its size (host_chunks(), the cache's byte budget) is still
// the full one. With VkPageStoreOptions::host_commit_ahead_bytes, a background thread (HostChunkCommitter)
// commits that much past the highest chunk in use before it is needed: pinning host memory costs about as
// much as copying it, and a request whose demotions or disk reads landed in fresh chunks paid it in its TTFT.
// hold_host_commits() pauses those background commits while GPU work that must be fast runs beside them;
// wait_for_host_commits() lets the owner finish the first ones before serving.
// It is the cache's PageCopier: a batch of page copies is recorded into one command buffer and submitted at
// once on the device's transfer queue (the compute queue where there is none), so promotions run while the
// compute queue runs steps of other sequences. Within a batch, the copies between one pair of buffers are
// the regions of one vkCmdCopyBuffer (adjacent pages merged into one region), so a prompt's run of pages is
// one command with no barrier between pages (a command per page wrote the same buffer each time, so the
// recorder put a barrier between every two). Page buffers are shared by both queue families
// (vk::Buffer makes them concurrent), so no ownership transfers are needed. Up to kCopySlots batches are in
// flight; a further one first waits for the oldest. completed() polls their fences. Ordering: the cache
// queues a copy only after the host has seen every step that wrote its source complete (forward() waits for
// its step); on one queue, batches run in submission order (each recording starts with a barrier against
// earlier work); a step is submitted only after the host has seen the batches it reads complete.
// It is also the host tier's CPU view for the disk tier (HostPageMemory: the mapped host chunks, invalidated
// before a read and flushed after a write, no-ops on coherent memory).
// Single owner thread (the scheduler). The Context must outlive it; it must outlive the KvCache using it.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/host_chunk_committer.h"
#include "cache/host_page_memory.h"
#include "cache/page_copier.h"
#include "kernels/ops/kv_layout.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"

namespace kvtrie {

// Whole pages [page_begin, page_begin + page_count) of a tier, in one buffer.
struct PageChunk {
  vk::BufferView view;
  uint32_t page_begin = 0;
  uint32_t page_count = 0;
};

struct VkPageStoreOptions {
  uint64_t host_chunk_bytes = 256ull << 20;  // host tier commit granularity (at least one page per chunk)
  // Host bytes to keep committed ahead of use by a background thread (rounded up to whole chunks); 0: every
  // chunk is committed on the owner thread at first use.
  uint64_t host_commit_ahead_bytes = 0;
};

class VkPageStore final : public PageCopier, public HostPageMemory {
 public:
  // Throws kvtrie::Error when the device tier cannot be allocated.
  VkPageStore(vk::Context& context, const kernels::KvLayout& layout, uint32_t device_pages,
              uint32_t host_pages, VkPageStoreOptions options = {});

  const kernels::KvLayout& layout() const { return layout_; }
  std::span<const PageChunk> device_chunks() const { return device_chunks_; }
  // Every host chunk, allocated or not (a view is empty until its chunk is committed).
  std::span<const PageChunk> host_chunks() const { return host_chunks_; }
  // The bytes of one page (any tier) as a view; for copies and tests. Commits the page's host chunk on first
  // use (throws kvtrie::Error when that allocation fails).
  vk::BufferView page(Tier tier, PageId page);
  // Host-tier bytes allocated so far, and how many host chunks that is.
  uint64_t host_bytes_committed() const { return host_committed_; }
  uint32_t host_chunks_committed() const;
  // For the load log line: how long allocating the device tier took, the host chunks' size in pages and how
  // many of them the background thread commits ahead of use.
  double device_alloc_ms() const { return device_alloc_ms_; }
  uint32_t host_pages_per_chunk() const { return host_pages_per_chunk_; }
  uint32_t commit_ahead_chunks() const { return commit_ahead_chunks_; }

  CopyTicket copy(std::span<const PageCopy> batch) override;
  CopyTicket completed() override;
  void wait() override;

  std::span<const std::byte> read_host_page(PageId page) override;
  std::span<std::byte> write_host_page(PageId page) override;
  void host_page_written(PageId page) override;

  uint64_t bytes_copied() const { return bytes_copied_; }
  // vkCmdCopyBuffer commands recorded so far (each holds one or more regions), and their regions.
  uint64_t copy_commands() const { return copy_commands_; }
  uint64_t copy_regions() const { return copy_regions_; }
  // Seconds the owner thread spent committing host chunks (or waiting for a background commit of one).
  double host_commit_seconds() const { return committer_->owner_seconds(); }
  const HostChunkCommitter& committer() const { return *committer_; }
  // Pauses (true) or resumes the background commits ahead of use (HostChunkCommitter::hold), and waits for
  // those wanted now (HostChunkCommitter::wait_caught_up).
  void hold_host_commits(bool held) { committer_->hold(held); }
  void wait_for_host_commits() { committer_->wait_caught_up(); }
  // Wall time from each batch's submission to the host seeing it complete, summed (a batch only polled is
  // seen late, so this overstates copy time when the cache does not wait).
  double copy_seconds() const { return copy_seconds_; }

  static constexpr size_t kCopySlots = 4;

 private:
  void commit_host_chunk(size_t chunk);
  // Records the batch into the recorder: one vkCmdCopyBuffer per run of copies between the same buffers.
  void record(vk::CommandRecorder& recorder, std::span<const PageCopy> batch);
  // The host page's mapped bytes and its chunk's buffer (committing the chunk on first use).
  std::span<std::byte> host_bytes(PageId page, const vk::Buffer** buffer);

  vk::Context& context_;
  kernels::KvLayout layout_;
  std::vector<vk::Buffer> device_buffers_;
  std::vector<vk::Buffer> host_buffers_;  // one per host chunk; invalid until committed
  std::vector<PageChunk> device_chunks_, host_chunks_;
  uint32_t host_pages_per_chunk_ = 1;
  uint32_t commit_ahead_chunks_ = 0;
  double device_alloc_ms_ = 0;
  uint64_t host_committed_ = 0;
  std::unique_ptr<HostChunkCommitter> committer_;  // laid out from host_chunks_
  struct Slot {
    std::unique_ptr<vk::CommandRecorder> recorder;  // on the transfer queue
    double submitted_at = 0;
  };
  Slot& slot(CopyTicket ticket) { return slots_[(ticket - 1) % kCopySlots]; }
  // Marks the oldest batch in flight complete (its recorder has finished).
  void retire_oldest();

  std::vector<Slot> slots_;
  CopyTicket queued_ = 0, done_ = 0;
  uint64_t bytes_copied_ = 0;
  uint64_t copy_commands_ = 0, copy_regions_ = 0;
  double copy_seconds_ = 0;
};

}  // namespace kvtrie
