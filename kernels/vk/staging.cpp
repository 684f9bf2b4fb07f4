#include "kernels/vk/staging.h"

#include <algorithm>
#include <cstring>

#include "kernels/error.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"

namespace kvtrie::vk {
namespace {
// Large transfers go through the staging buffer in pieces of this size so it stays small.
constexpr uint64_t kStagingChunk = 64ull << 20;
}  // namespace

void upload(Context& context, const Buffer& dst, uint64_t dst_offset, std::span<const std::byte> data) {
  KVTRIE_CHECK(dst_offset <= dst.size() && data.size() <= dst.size() - dst_offset,
               "upload past the buffer end");
  if (data.empty()) return;
  if (dst.data() != nullptr) {
    std::memcpy(static_cast<std::byte*>(dst.data()) + dst_offset, data.data(), data.size());
    dst.flush();
    return;
  }
  const uint64_t chunk = std::min<uint64_t>(kStagingChunk, data.size());
  Buffer staging(context.device(), chunk, MemoryKind::HostCoherent);
  CommandRecorder recorder(context, QueueKind::Transfer);
  for (uint64_t done = 0; done < data.size(); done += chunk) {
    const uint64_t n = std::min<uint64_t>(chunk, data.size() - done);
    std::memcpy(staging.data(), data.data() + done, n);
    staging.flush();
    recorder.begin();
    recorder.copy(staging.view(0, n), dst.view(dst_offset + done, n));
    recorder.end();
    recorder.submit_and_wait();
  }
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
  const uint64_t chunk = std::min<uint64_t>(kStagingChunk, out.size());
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
