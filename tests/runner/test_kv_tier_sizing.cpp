// size_kv_tiers: the device tier's default (a quarter of free memory, at least two contexts per slot), a
// configured size, the cap of what attention can bind, and the host tier (configured, or twice the device).
#include <gtest/gtest.h>

#include "runner/engine/kv_tier_sizing.h"

namespace kvtrie::engine {
namespace {

// llama3-8b-like: 2 MiB pages of 16 tokens; an 80 GB device with 60 GB free; bindings of 2048 pages.
KvTierInputs h100_like() {
  KvTierInputs in;
  in.page_bytes = 2u << 20;
  in.page_tokens = 16;
  in.n_ctx = 4096;
  in.parallel = 4;
  in.device_local_free = 60ull << 30;
  in.pages_per_binding = 2048;
  in.max_bindings = 4;
  return in;
}

TEST(KvTierSizing, DefaultDeviceTierIsAQuarterOfFreeMemoryAndHostTwiceThat) {
  const KvTierSizes s = size_kv_tiers(h100_like());
  EXPECT_EQ(s.pages_per_sequence, 256u);
  EXPECT_EQ(s.wanted_device_pages, (60ull << 30) / 4 / (2u << 20));  // 7680 pages
  EXPECT_EQ(s.device_pages, 7680u);
  EXPECT_EQ(s.host_pages, 2 * 7680u);
}

TEST(KvTierSizing, DefaultDeviceTierHoldsAtLeastTwoContextsPerSlot) {
  KvTierInputs in = h100_like();
  in.device_local_free = 1ull << 30;  // a quarter: 128 pages, below 2 x 4 slots x 256 pages
  in.n_ctx = 4000;                    // a partial last page still counts
  const KvTierSizes s = size_kv_tiers(in);
  EXPECT_EQ(s.pages_per_sequence, 250u);
  EXPECT_EQ(s.device_pages, 2u * 4 * 250);
}

TEST(KvTierSizing, ConfiguredBytesWinAndTheBindingsCapTheDeviceTier) {
  KvTierInputs in = h100_like();
  in.kv_device_bytes = 1ull << 30;
  in.kv_host_bytes = 3ull << 30;
  KvTierSizes s = size_kv_tiers(in);
  EXPECT_EQ(s.device_pages, 512u);
  EXPECT_EQ(s.host_pages, 1536u);
  in.kv_device_bytes = 64ull << 30;  // 32768 pages wanted, 4 x 2048 bindable
  s = size_kv_tiers(in);
  EXPECT_EQ(s.wanted_device_pages, 32768u);
  EXPECT_EQ(s.device_pages, 8192u);
  EXPECT_EQ(s.host_pages, 1536u);  // configured: not tied to the capped device tier
}

}  // namespace
}  // namespace kvtrie::engine
