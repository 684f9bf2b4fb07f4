// VkPageStore on lavapipe: the host tier is committed lazily, one chunk at a time on the first copy that
// touches one of its pages, while its size (the chunks' page counts and the cache's byte budget) is the full
// one from the start; pages copied device -> host -> device keep their bytes, in every chunk including the
// short last one; batches of copies are queued without blocking and complete in order; pages outside a
// tier are refused. A batch's copies between two buffers are one vkCmdCopyBuffer unless they depend on
// each other; host chunks can be committed ahead of use on a background thread.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "base/error.h"
#include "cache/kv_cache.h"
#include "cache/vk_page_store.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/memory.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie {
namespace {

// 2 layers x 4 tokens x 8 channels of K and V in f16: 256 bytes a page.
const kernels::KvLayout kLayout{2, 4, 8};
constexpr uint32_t kDevicePages = 4;
constexpr uint32_t kHostPages = 10;
constexpr uint32_t kPagesPerChunk = 3;  // host chunks: [0,3) [3,6) [6,9) [9,10)

class VkPageStoreTest : public test::VulkanTest {
 protected:
  // Writes `bytes` into a page through a GPU copy from a mapped buffer.
  void write_page(VkPageStore& store, Tier tier, PageId page, const std::vector<std::byte>& bytes) {
    vk::Buffer src(context().device(), bytes.size(), vk::MemoryKind::HostCoherent);
    std::memcpy(src.data(), bytes.data(), bytes.size());
    vk::CommandRecorder rec(context());
    rec.begin();
    rec.copy(src.view(), store.page(tier, page));
    rec.end();
    rec.submit_and_wait();
  }
  std::vector<std::byte> read_page(VkPageStore& store, Tier tier, PageId page) {
    vk::Buffer dst(context().device(), kLayout.page_bytes(), vk::MemoryKind::HostCached);
    vk::CommandRecorder rec(context());
    rec.begin();
    rec.copy(store.page(tier, page), dst.view());
    rec.end();
    rec.submit_and_wait();
    dst.invalidate();
    std::vector<std::byte> out(kLayout.page_bytes());
    std::memcpy(out.data(), dst.data(), out.size());
    return out;
  }
  std::vector<std::byte> random_page() {
    std::vector<std::byte> out(kLayout.page_bytes());
    for (std::byte& b : out) b = static_cast<std::byte>(rng()() & 0xff);
    return out;
  }
};

TEST_F(VkPageStoreTest, HostTierIsCommittedChunkByChunkOnFirstUse) {
  const uint64_t allocations_before = vk::live_allocation_count();
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages,
                    VkPageStoreOptions{kPagesPerChunk * kLayout.page_bytes()});
  // Only the device tier is allocated; the host tier is laid out in full.
  EXPECT_EQ(vk::live_allocation_count(), allocations_before + 1);
  EXPECT_EQ(store.host_bytes_committed(), 0u);
  EXPECT_EQ(store.host_chunks_committed(), 0u);
  ASSERT_EQ(store.host_chunks().size(), 4u);
  uint32_t host_pages = 0;
  for (const PageChunk& c : store.host_chunks()) {
    EXPECT_EQ(c.page_begin, host_pages);
    EXPECT_TRUE(c.view.empty());
    host_pages += c.page_count;
  }
  EXPECT_EQ(host_pages, kHostPages);
  EXPECT_EQ(store.host_chunks().back().page_count, 1u);

  // A demotion into page 7 commits chunk 2 only.
  const std::vector<std::byte> a = random_page();
  write_page(store, Tier::Device, 1, a);
  store.copy(std::vector<PageCopy>{{Tier::Device, 1, Tier::Host, 7}});
  store.wait();
  EXPECT_EQ(store.host_chunks_committed(), 1u);
  EXPECT_EQ(store.host_bytes_committed(), kPagesPerChunk * kLayout.page_bytes());
  EXPECT_FALSE(store.host_chunks()[2].view.empty());
  EXPECT_TRUE(store.host_chunks()[0].view.empty());

  // Another page of the same chunk commits nothing more; the short last chunk is committed on its own.
  const std::vector<std::byte> b = random_page();
  write_page(store, Tier::Device, 3, b);
  store.copy(std::vector<PageCopy>{{Tier::Device, 1, Tier::Host, 6}, {Tier::Device, 3, Tier::Host, 9}});
  store.wait();
  EXPECT_EQ(store.host_chunks_committed(), 2u);
  EXPECT_EQ(store.host_bytes_committed(), (kPagesPerChunk + 1) * kLayout.page_bytes());

  // Promotion back: the bytes survive the round trip.
  store.copy(std::vector<PageCopy>{{Tier::Host, 7, Tier::Device, 0}, {Tier::Host, 9, Tier::Device, 2}});
  store.wait();
  EXPECT_EQ(read_page(store, Tier::Device, 0), a);
  EXPECT_EQ(read_page(store, Tier::Device, 2), b);
  EXPECT_EQ(read_page(store, Tier::Host, 6), a);
  EXPECT_EQ(store.bytes_copied(), 5 * kLayout.page_bytes());
}

TEST_F(VkPageStoreTest, BatchesRunWithoutBlockingInQueueOrderAndCompleteInTicketOrder) {
  // More batches than copy slots, each reading the page the previous one wrote: the chain only gives the
  // original bytes if batches run in queue order, and queuing the fifth batch reuses the first's slot.
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages);
  const std::vector<std::byte> a = random_page();
  write_page(store, Tier::Device, 0, a);
  const PageCopy chain[] = {{Tier::Device, 0, Tier::Host, 0},   {Tier::Host, 0, Tier::Device, 1},
                            {Tier::Device, 1, Tier::Host, 5},   {Tier::Host, 5, Tier::Device, 2},
                            {Tier::Device, 2, Tier::Device, 3}, {Tier::Device, 3, Tier::Host, 9}};
  static_assert(std::size(chain) > VkPageStore::kCopySlots);
  CopyTicket last_seen = 0;
  for (size_t i = 0; i < std::size(chain); ++i) {
    EXPECT_EQ(store.copy(std::span(chain).subspan(i, 1)), i + 1);
    const CopyTicket done = store.completed();
    EXPECT_GE(done, last_seen) << "completed() never goes back";
    EXPECT_LE(done, i + 1);
    last_seen = done;
  }
  EXPECT_EQ(store.copy({}), std::size(chain)) << "an empty batch queues nothing";
  store.wait();
  EXPECT_EQ(store.completed(), std::size(chain));
  EXPECT_EQ(read_page(store, Tier::Host, 9), a);
  EXPECT_EQ(read_page(store, Tier::Device, 2), a);
  EXPECT_EQ(store.bytes_copied(), std::size(chain) * kLayout.page_bytes());
}

TEST_F(VkPageStoreTest, TheCachesBudgetIsTheFullHostTierBeforeAnyCommit) {
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages,
                    VkPageStoreOptions{kPagesPerChunk * kLayout.page_bytes()});
  KvCache cache(KvCacheConfig{kLayout.page_tokens, kLayout.page_bytes(), kDevicePages * kLayout.page_bytes(),
                              kHostPages * kLayout.page_bytes()},
                store);
  const KvCacheStats stats = cache.stats();
  EXPECT_EQ(stats.host_pages_capacity, kHostPages);
  EXPECT_EQ(stats.host_bytes_budget, kHostPages * kLayout.page_bytes());
  EXPECT_EQ(store.host_bytes_committed(), 0u);
}

TEST_F(VkPageStoreTest, PagesOutsideATierAreRefused) {
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages,
                    VkPageStoreOptions{kPagesPerChunk * kLayout.page_bytes()});
  EXPECT_THROW(store.page(Tier::Device, kDevicePages), Error);
  EXPECT_THROW(store.page(Tier::Host, kHostPages), Error);
  EXPECT_EQ(store.host_bytes_committed(), 0u);
  VkPageStore no_host(context(), kLayout, kDevicePages, 0);
  EXPECT_TRUE(no_host.host_chunks().empty());
  EXPECT_THROW(no_host.page(Tier::Host, 0), Error);
}

TEST_F(VkPageStoreTest, ABatchIsOneCopyCommandPerRunBetweenTwoBuffers) {
  // Before: a vkCmdCopyBuffer per page, each writing the same device buffer, so the recorder put a barrier
  // between every two pages of a promotion.
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages,
                    VkPageStoreOptions{kPagesPerChunk * kLayout.page_bytes()});
  std::vector<std::vector<std::byte>> bytes;
  for (PageId p = 0; p < kDevicePages; ++p) {
    bytes.push_back(random_page());
    write_page(store, Tier::Device, p, bytes.back());
  }
  // Device 0..2 -> host 0..2 (chunk 0): one command, one region (adjacent on both sides); 3 -> host 4
  // (chunk 1): a second command.
  store.copy(std::vector<PageCopy>{{Tier::Device, 0, Tier::Host, 0},
                                   {Tier::Device, 1, Tier::Host, 1},
                                   {Tier::Device, 2, Tier::Host, 2},
                                   {Tier::Device, 3, Tier::Host, 4}});
  store.wait();
  EXPECT_EQ(store.copy_commands(), 2u);
  EXPECT_EQ(store.copy_regions(), 2u);
  // Back, shuffled: host 0 -> 3 and 1 -> 1 share a command (two regions), host 4 (chunk 1) another, host 2
  // (chunk 0 again, after the run changed buffers) a third.
  store.copy(std::vector<PageCopy>{{Tier::Host, 0, Tier::Device, 3},
                                   {Tier::Host, 1, Tier::Device, 1},
                                   {Tier::Host, 4, Tier::Device, 0},
                                   {Tier::Host, 2, Tier::Device, 2}});
  store.wait();
  EXPECT_EQ(store.copy_commands(), 5u);
  EXPECT_EQ(store.copy_regions(), 6u);
  EXPECT_EQ(read_page(store, Tier::Device, 3), bytes[0]);
  EXPECT_EQ(read_page(store, Tier::Device, 1), bytes[1]);
  EXPECT_EQ(read_page(store, Tier::Device, 0), bytes[3]);
  EXPECT_EQ(read_page(store, Tier::Device, 2), bytes[2]);
}

TEST_F(VkPageStoreTest, CopiesOfOneBatchThatDependOnEachOtherKeepQueueOrder) {
  // Device 0 -> 1 then 1 -> 2 go between the same two buffers, but the second reads what the first
  // writes: they must not share a command (the validation layer refuses overlapping regions too).
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages);
  const std::vector<std::byte> a = random_page(), b = random_page();
  write_page(store, Tier::Device, 0, a);
  write_page(store, Tier::Device, 1, b);
  store.copy(std::vector<PageCopy>{{Tier::Device, 0, Tier::Device, 1},
                                   {Tier::Device, 1, Tier::Device, 2},
                                   {Tier::Device, 2, Tier::Host, 3},
                                   {Tier::Host, 3, Tier::Device, 3}});
  store.wait();
  EXPECT_EQ(store.copy_commands(), 4u);
  for (PageId p = 1; p < 4; ++p) EXPECT_EQ(read_page(store, Tier::Device, p), a) << "device page " << p;
}

TEST_F(VkPageStoreTest, HostChunksAreCommittedAheadOfUseInTheBackground) {
  // Pinning host memory at first use put its cost (tens of ms per 256 MiB on NVIDIA) into the TTFT of the
  // request whose demotions or disk reads reached a fresh chunk: the committer does it beforehand.
  const uint64_t allocations_before = vk::live_allocation_count();
  {
    VkPageStoreOptions options{kPagesPerChunk * kLayout.page_bytes()};
    options.host_commit_ahead_bytes = 2 * kPagesPerChunk * kLayout.page_bytes() - 1;  // rounds up to 2
    VkPageStore store(context(), kLayout, kDevicePages, kHostPages, options);
    auto wait_for_commits = [&](uint32_t n) {
      for (int i = 0; i < 500 && store.committer().background_commits() < n; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(store.committer().background_commits(), n);
    };
    store.wait_for_host_commits();  // chunks 0 and 1, before any use (as the engine does at load)
    EXPECT_EQ(store.committer().background_commits(), 2u);
    EXPECT_EQ(vk::live_allocation_count(), allocations_before + 1 + 2);
    EXPECT_EQ(store.host_chunks_committed(), 0u) << "committed ahead, not yet handed to the store";

    // First use of chunk 0: taken from the committer; nothing more is needed ahead (chunks 1, 2 wanted).
    const std::vector<std::byte> a = random_page();
    write_page(store, Tier::Device, 0, a);
    store.copy(std::vector<PageCopy>{{Tier::Device, 0, Tier::Host, 1}});
    store.wait();
    wait_for_commits(3);
    EXPECT_EQ(store.host_chunks_committed(), 1u);
    // Chunk 3 (the short last one) is used first by a copy: committed on the spot, and nothing is committed
    // twice.
    store.copy(std::vector<PageCopy>{{Tier::Host, 1, Tier::Host, 9}, {Tier::Host, 9, Tier::Device, 2}});
    store.wait();
    EXPECT_EQ(store.host_chunks_committed(), 2u);
    EXPECT_EQ(read_page(store, Tier::Device, 2), a);
    EXPECT_EQ(read_page(store, Tier::Host, 9), a);
    EXPECT_LE(vk::live_allocation_count(), allocations_before + 1 + 4);
  }
  EXPECT_EQ(vk::live_allocation_count(), allocations_before) << "chunks never taken are freed too";
}

// Held (a disk hit computing beside its read), the committer starts no commit ahead of use; released, it
// catches up. A chunk a copy needs meanwhile is still committed on the spot.
TEST_F(VkPageStoreTest, HeldCommitsWaitUntilReleased) {
  VkPageStoreOptions options{kPagesPerChunk * kLayout.page_bytes()};
  options.host_commit_ahead_bytes = kPagesPerChunk * kLayout.page_bytes();  // one chunk ahead
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages, options);
  store.wait_for_host_commits();
  ASSERT_EQ(store.committer().background_commits(), 1u) << "chunk 0, before any use";
  store.hold_host_commits(true);
  const std::vector<std::byte> a = random_page();
  write_page(store, Tier::Device, 0, a);
  store.copy(std::vector<PageCopy>{{Tier::Device, 0, Tier::Host, 1}});  // chunk 0 in use: chunk 1 wanted
  store.wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(store.committer().background_commits(), 1u) << "a commit started while held";
  store.copy(std::vector<PageCopy>{{Tier::Host, 1, Tier::Host, kPagesPerChunk}});  // chunk 1, on the spot
  store.wait();
  EXPECT_EQ(store.host_chunks_committed(), 2u);
  EXPECT_EQ(read_page(store, Tier::Host, kPagesPerChunk), a);
  store.wait_for_host_commits();
  EXPECT_EQ(store.committer().background_commits(), 1u) << "held: nothing to wait for";
  store.hold_host_commits(false);  // chunk 2 wanted now
  store.wait_for_host_commits();
  EXPECT_EQ(store.committer().background_commits(), 2u) << "released, it did not catch up";
}

TEST_F(VkPageStoreTest, AFailedCommitAheadIsRetriedOnUse) {
  VkPageStoreOptions options{kPagesPerChunk * kLayout.page_bytes()};
  vk::inject_allocation_failure(2);  // the device tier's allocation is the first, chunk 0 the second
  options.host_commit_ahead_bytes = kPagesPerChunk * kLayout.page_bytes();
  VkPageStore store(context(), kLayout, kDevicePages, kHostPages, options);
  for (int i = 0; i < 500 && store.committer().background_failures() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(store.committer().background_failures(), 1u);
  EXPECT_EQ(store.committer().background_commits(), 0u);
  const std::vector<std::byte> a = random_page();
  write_page(store, Tier::Device, 0, a);
  store.copy(std::vector<PageCopy>{{Tier::Device, 0, Tier::Host, 2}, {Tier::Host, 2, Tier::Device, 1}});
  store.wait();
  EXPECT_EQ(read_page(store, Tier::Device, 1), a);
  EXPECT_EQ(store.host_chunks_committed(), 1u);
}

}  // namespace
}  // namespace kvtrie
