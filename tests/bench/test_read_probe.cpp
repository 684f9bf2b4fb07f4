// bench's probe shaders. read_probe (the read-bandwidth probe of kvtrie-bench bandwidth): every 16-byte
// element is read exactly once, so the XOR of all sink words equals the XOR of every 32-bit word of the
// source, for element counts that do not divide evenly among the invocations or their rounds of loads.
#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "bench/probes/bench_shaders.h"
#include "bench/probes/read_probe.h"
#include "kernels/ops/kernels.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/shader_registry.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::bench {
namespace {

// The probes' SPIR-V is bench's own: kernels embeds none of it, and no name is both's.
TEST(BenchShaders, AreNotKernels) {
  EXPECT_NE(find_bench_spirv("read_probe_u32"), nullptr);
  EXPECT_NE(find_bench_spirv("attention_probe1"), nullptr);
  EXPECT_EQ(vk::find_spirv("read_probe_u32"), nullptr);
  for (const vk::SpirvBlob* blob : bench_spirv_blobs())
    EXPECT_EQ(vk::find_spirv(blob->name), nullptr) << blob->name;
}

class ReadProbeTest : public test::VulkanTest {};

TEST_F(ReadProbeTest, ReadsEveryElementOnce) {
  kernels::Kernels k(context(), kernels::Prewarm::No);
  for (uint32_t unroll : {1u, 2u, 4u, 8u})
    for (uint32_t elements : {1u, 1000u, 70001u}) {
      SCOPED_TRACE(testing::Message() << elements << " elements, " << unroll << " loads a round");
      std::vector<uint32_t> words(uint64_t{elements} * 4);
      uint32_t expected = 0;
      for (auto& w : words) {
        w = static_cast<uint32_t>(rng()());
        expected ^= w;
      }
      vk::Buffer src = device_buffer(words);
      const uint32_t threads = 300;  // not a multiple of the work-group size
      const uint32_t invocations = read_probe_invocations(k, threads);
      vk::Buffer sink(context().device(), uint64_t{invocations} * 4, vk::MemoryKind::DeviceLocal);
      vk::CommandRecorder rec(context());
      rec.begin();
      read_probe(rec, k, src.view(0, uint64_t{elements} * 16), sink.view(), threads, unroll);
      rec.end();
      rec.submit_and_wait();
      uint32_t got = 0;
      for (uint32_t v : read_back<uint32_t>(sink, invocations)) got ^= v;
      EXPECT_EQ(got, expected);
    }
}

TEST_F(ReadProbeTest, RefusesOtherRounds) {
  kernels::Kernels k(context(), kernels::Prewarm::No);
  vk::Buffer src(context().device(), 64, vk::MemoryKind::DeviceLocal);
  vk::Buffer sink(context().device(), 4096, vk::MemoryKind::DeviceLocal);
  vk::CommandRecorder rec(context());
  rec.begin();
  EXPECT_THROW(read_probe(rec, k, src.view(), sink.view(), 128, 3), Error);
  rec.end();
}

}  // namespace
}  // namespace kvtrie::bench
