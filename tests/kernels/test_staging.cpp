// The staging ring (vk::Uploader): uploads larger than one slot, odd sizes and offsets, many small uploads
// sharing slots, host-visible destinations and the multi-threaded copy of large pieces all read back
// byte-exact; the ring never allocates more slots than asked and reuses them; a failed slot allocation
// leaks nothing.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/memory.h"
#include "kernels/vk/staging.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::vk {
namespace {

using test::VulkanTest;

class Staging : public VulkanTest {
 protected:
  std::vector<std::byte> random_bytes(size_t n) {
    std::vector<std::byte> out(n);
    for (std::byte& b : out) b = static_cast<std::byte>(rng()() & 0xff);
    return out;
  }
  std::vector<std::byte> read(const Buffer& b) {
    std::vector<std::byte> out(b.size());
    download(context(), b, 0, out);
    return out;
  }
};

TEST_F(Staging, UploadsLargerThanASlotAndOddSizesReadBackExactly) {
  constexpr uint64_t kSlot = 4096;
  Uploader up(context(), {kSlot, 3, 1});
  // Sizes around and across slot boundaries, at odd offsets.
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {
      {1, 0}, {3, 5}, {kSlot - 1, 7}, {kSlot, 0}, {kSlot + 1, 3}, {5 * kSlot + 13, 1}, {17 * kSlot + 9, 11}};
  std::vector<Buffer> buffers;
  std::vector<std::vector<std::byte>> expected;
  for (auto [size, offset] : cases) {
    buffers.emplace_back(context().device(), size + offset + 5, MemoryKind::DeviceLocal);
    std::vector<std::byte> want(size + offset + 5, std::byte{0});
    // Zero the whole buffer first (through the same ring), then the payload at its offset.
    up.upload(buffers.back(), 0, want);
    const std::vector<std::byte> payload = random_bytes(size);
    std::memcpy(want.data() + offset, payload.data(), size);
    up.upload(buffers.back(), offset, payload);
    expected.push_back(std::move(want));
  }
  up.finish();
  EXPECT_LE(up.slots_allocated(), 3u);
  EXPECT_GT(up.submissions(), 3u) << "the ring should have been reused";
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + std::to_string(cases[i].first) + " bytes");
    EXPECT_EQ(read(buffers[i]), expected[i]);
  }
}

TEST_F(Staging, ManySmallUploadsShareSlots) {
  constexpr uint64_t kSlot = 64 << 10;
  Uploader up(context(), {kSlot, 2, 1});
  Buffer block(context().device(), 1 << 20, MemoryKind::DeviceLocal);
  std::vector<std::byte> want(block.size(), std::byte{0});
  up.upload(block, 0, want);
  uint64_t offset = 0, payload = 0;
  uint32_t tensors = 0;
  for (uint64_t size = 1; offset + size <= block.size(); size = size * 7 % 509 + 1, ++tensors) {
    const std::vector<std::byte> t = random_bytes(size);
    std::memcpy(want.data() + offset, t.data(), size);
    up.upload(block, offset, t);
    offset += size + (size % 3);  // leave small gaps
    payload += size;
  }
  up.finish();
  ASSERT_GT(tensors, 1000u);
  // Packed: far fewer submissions than uploads (each slot carries many of them).
  EXPECT_LE(up.submissions(), 1u + 2 * block.size() / kSlot);
  EXPECT_EQ(up.bytes(), block.size() + payload);
  EXPECT_EQ(read(block), want);
}

TEST_F(Staging, LargePiecesAreCopiedByThreadsExactly) {
  // Pieces of at least 4 MiB go through the copy threads; 4 threads, an odd size split unevenly.
  const std::vector<std::byte> data = random_bytes((9 << 20) + 12345);
  Buffer b(context().device(), data.size(), MemoryKind::DeviceLocal);
  {
    Uploader up(context(), {8 << 20, 2, 4});
    up.upload(b, 0, data);
  }  // the destructor finishes
  EXPECT_EQ(read(b), data);
}

TEST_F(Staging, HostVisibleDestinationsAreWrittenThroughTheirMapping) {
  const std::vector<std::byte> data = random_bytes(1000);
  Buffer b(context().device(), 1003, MemoryKind::HostCached);
  Uploader up(context());
  up.upload(b, 3, data);
  up.finish();
  EXPECT_EQ(up.slots_allocated(), 0u) << "no staging for a mapped destination";
  std::vector<std::byte> got(1000);
  download(context(), b, 3, got);
  EXPECT_EQ(got, data);
}

TEST_F(Staging, UploadPastTheEndThrowsAndAFailedSlotAllocationLeaksNothing) {
  Buffer b(context().device(), 64, MemoryKind::DeviceLocal);
  const std::vector<std::byte> data = random_bytes(65);
  Uploader up(context(), {4096, 2, 1});
  EXPECT_THROW(up.upload(b, 0, data), Error);
  EXPECT_THROW(up.upload(b, 60, std::span(data).first(5)), Error);
  {
    inject_allocation_failure(1);  // the first slot's staging buffer
    Uploader failing(context(), {4096, 2, 1});
    EXPECT_THROW(failing.upload(b, 0, std::span(data).first(64)), Error);
    inject_allocation_failure(0);
  }
  EXPECT_EQ(live_allocation_count(), 1u) << "only the destination buffer is alive";
}

}  // namespace
}  // namespace kvtrie::vk
