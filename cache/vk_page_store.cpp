#include "cache/vk_page_store.h"

#include <algorithm>
#include <chrono>

#include "kernels/error.h"
#include "kernels/vk/device.h"

namespace kvtrie {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

VkPageStore::VkPageStore(vk::Context& context, const kernels::KvLayout& layout, uint32_t device_pages,
                         uint32_t host_pages)
    : context_(context), layout_(layout), recorder_(context, vk::QueueKind::Compute) {
  allocate_tier(device_pages, vk::MemoryKind::DeviceLocal, device_buffers_, device_chunks_);
  allocate_tier(host_pages, vk::MemoryKind::HostCached, host_buffers_, host_chunks_);
}

void VkPageStore::allocate_tier(uint32_t pages, vk::MemoryKind kind, std::vector<vk::Buffer>& buffers,
                                std::vector<PageChunk>& chunks) {
  const uint64_t per_chunk = layout_.pages_per_binding(context_.device().max_storage_buffer_range());
  KVTRIE_CHECK(per_chunk > 0, "one KV page is larger than a storage-buffer binding");
  for (uint32_t begin = 0; begin < pages;) {
    const auto count = static_cast<uint32_t>(std::min<uint64_t>(per_chunk, pages - begin));
    buffers.emplace_back(context_.device(), count * layout_.page_bytes(), kind);
    chunks.push_back({buffers.back().view(), begin, count});
    begin += count;
  }
}

vk::BufferView VkPageStore::page(Tier tier, PageId page) const {
  const auto& chunks = tier == Tier::Device ? device_chunks_ : host_chunks_;
  for (const PageChunk& chunk : chunks)
    if (page >= chunk.page_begin && page < chunk.page_begin + chunk.page_count)
      return chunk.view.sub((page - chunk.page_begin) * layout_.page_bytes(), layout_.page_bytes());
  throw Error("page " + std::to_string(page) + " is outside the " + std::string(tier_name(tier)) + " tier");
}

void VkPageStore::copy(std::span<const PageCopy> batch) {
  if (batch.empty()) return;
  // One recording per batch; a batch queued while another is in flight waits for it (queue order holds).
  wait();
  recorder_.begin();
  for (const PageCopy& c : batch) recorder_.copy(page(c.from_tier, c.from), page(c.to_tier, c.to));
  recorder_.end();
  submitted_at_ = now_seconds();
  recorder_.submit();
  pending_ = true;
  bytes_copied_ += batch.size() * layout_.page_bytes();
}

void VkPageStore::wait() {
  if (!pending_) return;
  recorder_.wait();
  copy_seconds_ += now_seconds() - submitted_at_;
  pending_ = false;
  // Host pages written by the GPU are read only by later GPU copies, never by the CPU: no invalidate.
}

}  // namespace kvtrie
