// Contract: VkPageStore owns the memory behind the two page pools: the device tier (device-local, bound by
// attention and kv_write) and the host tier (host-visible, host-cached), each split into chunks of whole
// pages so that one chunk fits one shader binding (maxStorageBufferRange). It is the cache's PageCopier: a
// batch of page copies is recorded into one command buffer (a recording starts with a barrier against all
// earlier GPU work, so a copy sees every write already submitted) and submitted at once; wait() blocks on
// its fence. Copies run on the compute queue: kvtrie's page buffers are exclusive to one queue family, and
// the engine waits for each step before the cache queues copies, so a separate queue would buy no overlap
// without semaphores (a known limit, see docs/BENCHMARKS.md).
// Single owner thread (the scheduler). The Context must outlive it; it must outlive the KvCache using it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

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

class VkPageStore final : public PageCopier {
 public:
  // Throws kvtrie::Error when the memory cannot be allocated.
  VkPageStore(vk::Context& context, const kernels::KvLayout& layout, uint32_t device_pages, uint32_t host_pages);

  const kernels::KvLayout& layout() const { return layout_; }
  std::span<const PageChunk> device_chunks() const { return device_chunks_; }
  std::span<const PageChunk> host_chunks() const { return host_chunks_; }
  // The bytes of one page (any tier) as a view; for copies and tests.
  vk::BufferView page(Tier tier, PageId page) const;

  void copy(std::span<const PageCopy> batch) override;
  void wait() override;

  uint64_t bytes_copied() const { return bytes_copied_; }
  double copy_seconds() const { return copy_seconds_; }  // wall time from submit to completion, summed

 private:
  void allocate_tier(uint32_t pages, vk::MemoryKind kind, std::vector<vk::Buffer>& buffers,
                     std::vector<PageChunk>& chunks);

  vk::Context& context_;
  kernels::KvLayout layout_;
  std::vector<vk::Buffer> device_buffers_, host_buffers_;
  std::vector<PageChunk> device_chunks_, host_chunks_;
  vk::CommandRecorder recorder_;
  bool pending_ = false;
  uint64_t bytes_copied_ = 0;
  double copy_seconds_ = 0;
  double submitted_at_ = 0;
};

}  // namespace kvtrie
