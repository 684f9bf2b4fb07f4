#include "cache/vk_page_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>

#include "base/error.h"
#include "kernels/vk/device.h"

namespace kvtrie {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

VkPageStore::VkPageStore(vk::Context& context, const kernels::KvLayout& layout, uint32_t device_pages,
                         uint32_t host_pages, VkPageStoreOptions options)
    : context_(context), layout_(layout) {
  for (size_t i = 0; i < kCopySlots; ++i)
    slots_.push_back({std::make_unique<vk::CommandRecorder>(context_, vk::QueueKind::Transfer), 0.0});
  const double start = now_seconds();
  const uint64_t page_bytes = layout_.page_bytes();
  const uint64_t per_binding = layout_.pages_per_binding(context_.device().max_storage_buffer_range());
  KVTRIE_CHECK(per_binding > 0, "one KV page is larger than a storage-buffer binding");
  for (uint32_t begin = 0; begin < device_pages;) {
    const auto count = static_cast<uint32_t>(std::min<uint64_t>(per_binding, device_pages - begin));
    device_buffers_.emplace_back(context_.device(), count * page_bytes, vk::MemoryKind::DeviceLocal);
    device_chunks_.push_back({device_buffers_.back().view(), begin, count});
    begin += count;
  }
  const double device_s = now_seconds() - start;
  // Host chunks are laid out now and allocated on first use.
  host_pages_per_chunk_ =
      static_cast<uint32_t>(std::clamp<uint64_t>(options.host_chunk_bytes / page_bytes, 1, per_binding));
  for (uint32_t begin = 0; begin < host_pages;) {
    const auto count = std::min(host_pages_per_chunk_, host_pages - begin);
    host_chunks_.push_back({{}, begin, count});
    begin += count;
  }
  host_buffers_.resize(host_chunks_.size());
  std::vector<uint64_t> chunk_bytes;
  for (const PageChunk& c : host_chunks_) chunk_bytes.push_back(uint64_t{c.page_count} * page_bytes);
  const uint64_t chunk_size = uint64_t{host_pages_per_chunk_} * page_bytes;
  const auto ahead = static_cast<uint32_t>(std::min<uint64_t>(
      (options.host_commit_ahead_bytes + chunk_size - 1) / chunk_size, host_chunks_.size()));
  committer_ = std::make_unique<HostChunkCommitter>(context_.device(), std::move(chunk_bytes), ahead);

  commit_ahead_chunks_ = ahead;
  device_alloc_ms_ = device_s * 1e3;
  spdlog::debug("kv: device tier {} MiB in {:.0f} ms, host tier {} MiB committed on use",
                uint64_t{device_pages} * page_bytes >> 20, device_alloc_ms_,
                uint64_t{host_pages} * page_bytes >> 20);
}

uint32_t VkPageStore::host_chunks_committed() const {
  return static_cast<uint32_t>(std::count_if(host_buffers_.begin(), host_buffers_.end(),
                                             [](const vk::Buffer& b) { return b.valid(); }));
}

void VkPageStore::commit_host_chunk(size_t chunk) {
  PageChunk& c = host_chunks_[chunk];
  host_buffers_[chunk] = committer_->take(chunk);
  c.view = host_buffers_[chunk].view();
  host_committed_ += host_buffers_[chunk].size();
}

vk::BufferView VkPageStore::page(Tier tier, PageId page) {
  if (tier == Tier::Host) {
    const size_t chunk = page / host_pages_per_chunk_;
    if (chunk < host_chunks_.size() &&
        page < host_chunks_[chunk].page_begin + host_chunks_[chunk].page_count) {
      if (!host_buffers_[chunk].valid()) commit_host_chunk(chunk);
      const PageChunk& c = host_chunks_[chunk];
      return c.view.sub((page - c.page_begin) * layout_.page_bytes(), layout_.page_bytes());
    }
  } else {
    for (const PageChunk& chunk : device_chunks_)
      if (page >= chunk.page_begin && page < chunk.page_begin + chunk.page_count)
        return chunk.view.sub((page - chunk.page_begin) * layout_.page_bytes(), layout_.page_bytes());
  }
  throw Error("page " + std::to_string(page) + " is outside the " + std::string(tier_name(tier)) + " tier");
}

std::span<std::byte> VkPageStore::host_bytes(PageId page, const vk::Buffer** buffer) {
  this->page(Tier::Host, page);  // range check and commit
  const size_t chunk = page / host_pages_per_chunk_;
  *buffer = &host_buffers_[chunk];
  auto* base = static_cast<std::byte*>(host_buffers_[chunk].data());
  const uint64_t offset = uint64_t{page - host_chunks_[chunk].page_begin} * layout_.page_bytes();
  return {base + offset, layout_.page_bytes()};
}

std::span<const std::byte> VkPageStore::read_host_page(PageId page) {
  const vk::Buffer* buffer = nullptr;
  const std::span<std::byte> bytes = host_bytes(page, &buffer);
  buffer->invalidate();  // the GPU's demotion copy wrote it
  return bytes;
}

std::span<std::byte> VkPageStore::write_host_page(PageId page) {
  const vk::Buffer* buffer = nullptr;
  return host_bytes(page, &buffer);
}

void VkPageStore::host_page_written(PageId page) {
  const vk::Buffer* buffer = nullptr;
  host_bytes(page, &buffer);
  buffer->flush();  // the promotion copy reads it next
}

CopyTicket VkPageStore::copy(std::span<const PageCopy> batch) {
  if (batch.empty()) return queued_;
  // Commit the host chunks this batch touches first, so an allocation failure leaves no recording open.
  for (const PageCopy& c : batch)
    for (auto [tier, id] : {std::pair{c.from_tier, c.from}, std::pair{c.to_tier, c.to}})
      if (tier == Tier::Host) page(tier, id);
  const CopyTicket ticket = queued_ + 1;
  while (done_ + kCopySlots < ticket) {  // every slot is in flight: the oldest must finish first
    slot(done_ + 1).recorder->wait();
    retire_oldest();
  }
  Slot& s = slot(ticket);
  s.recorder->begin();
  record(*s.recorder, batch);
  s.recorder->end();
  s.submitted_at = now_seconds();
  s.recorder->submit();
  queued_ = ticket;
  bytes_copied_ += batch.size() * layout_.page_bytes();
  return ticket;
}

void VkPageStore::record(vk::CommandRecorder& recorder, std::span<const PageCopy> batch) {
  // A run of consecutive copies between the same two buffers becomes one vkCmdCopyBuffer, as long as no
  // copy of the run reads or writes a page an earlier one of it writes, or writes a page an earlier one
  // reads (queue order: a later copy may read what an earlier one wrote); such a copy starts a new run,
  // which the recorder puts behind a barrier.
  using Key = std::pair<Tier, PageId>;
  std::set<Key> read, written;
  std::vector<vk::CopyRegion> regions;
  vk::BufferView run_src, run_dst;
  auto flush = [&] {
    if (regions.empty()) return;
    recorder.copy(run_src, run_dst, regions);
    ++copy_commands_;
    copy_regions_ += regions.size();
    regions.clear();
    read.clear();
    written.clear();
  };
  for (const PageCopy& c : batch) {
    const vk::BufferView src = page(c.from_tier, c.from), dst = page(c.to_tier, c.to);
    const Key from{c.from_tier, c.from}, to{c.to_tier, c.to};
    const bool same_buffers = src.buffer == run_src.buffer && dst.buffer == run_dst.buffer;
    if (!same_buffers || written.contains(from) || written.contains(to) || read.contains(to)) flush();
    if (regions.empty()) {
      // The run's views are the whole buffers: page views are offsets into them.
      run_src = {src.buffer, 0, src.offset + src.range};
      run_dst = {dst.buffer, 0, dst.offset + dst.range};
    }
    run_src.range = std::max(run_src.range, src.offset + src.range);
    run_dst.range = std::max(run_dst.range, dst.offset + dst.range);
    vk::CopyRegion* last = regions.empty() ? nullptr : &regions.back();
    if (last != nullptr && last->src_offset + last->size == src.offset &&
        last->dst_offset + last->size == dst.offset)
      last->size += src.range;  // the next page of both runs: one region
    else
      regions.push_back({src.offset, dst.offset, src.range});
    read.insert(from);
    written.insert(to);
  }
  flush();
}

void VkPageStore::retire_oldest() {
  copy_seconds_ += now_seconds() - slot(done_ + 1).submitted_at;
  ++done_;
}

CopyTicket VkPageStore::completed() {
  while (done_ < queued_ && slot(done_ + 1).recorder->poll()) retire_oldest();
  return done_;
}

void VkPageStore::wait() {
  while (done_ < queued_) {
    slot(done_ + 1).recorder->wait();
    retire_oldest();
  }
  // Host pages written by the GPU are read only by later GPU copies, never by the CPU: no invalidate.
}

}  // namespace kvtrie
