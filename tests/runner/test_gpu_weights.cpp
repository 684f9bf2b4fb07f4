// upload_weights on lavapipe: every tensor of a synthetic model lands byte-exact in its block, at a
// binding-aligned offset, without overlapping another, with one block or many small ones (allocated on the
// helper thread while the upload runs); a failed block allocation throws and leaks nothing; weight_types
// lists each type of the model once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "bench/synthetic/synthetic_model.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/device.h"
#include "kernels/vk/memory.h"
#include "runner/engine/gpu_weights.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "tests/support/paths.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::engine {
namespace {

class GpuWeightsTest : public test::VulkanTest {
 public:
  std::vector<std::byte> read(const vk::BufferView& view) {
    vk::Buffer dst(context().device(), view.range, vk::MemoryKind::HostCached);
    vk::CommandRecorder rec(context());
    rec.begin();
    rec.copy(view, dst.view());
    rec.end();
    rec.submit_and_wait();
    dst.invalidate();
    std::vector<std::byte> out(view.range);
    std::memcpy(out.data(), dst.data(), out.size());
    return out;
  }
};

// Uploads a tiny model with blocks of at most `block_bytes` and checks every tensor; returns the block count.
size_t check_upload(GpuWeightsTest& t, vk::Context& ctx, uint64_t block_bytes) {
  const auto path = synth::write_preset(test::scratch_dir() / "weights.gguf", "tiny", TensorType::Q4_K, 7);
  const GgufFile file = GgufFile::open(path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const ModelWeights w = ModelWeights::from_gguf(file, config);
  const GpuWeights g = upload_weights(ctx, w, config, block_bytes);
  uint64_t total = 0;
  for (const vk::Buffer& b : g.blocks) total += b.size();
  EXPECT_EQ(g.bytes, total);

  struct Pair {
    const DeviceTensor* device;
    const GgufTensor* file;
  };
  std::vector<Pair> pairs{{&g.token_embd, w.token_embd}, {&g.output_norm, w.output_norm}};
  if (!g.tied) pairs.push_back({&g.output, w.output});
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const DeviceLayer& d = g.layers[l];
    for (const Pair& p : std::vector<Pair>{{&d.attn_norm, lw.attn_norm},
                                           {&d.wq, lw.wq},
                                           {&d.wk, lw.wk},
                                           {&d.wv, lw.wv},
                                           {&d.wo, lw.wo},
                                           {&d.ffn_norm, lw.ffn_norm},
                                           {&d.w_gate, lw.w_gate},
                                           {&d.w_up, lw.w_up},
                                           {&d.w_down, lw.w_down}})
      pairs.push_back(p);
  }
  const uint64_t alignment = ctx.device().info().min_storage_buffer_offset_alignment;
  std::vector<std::tuple<VkBuffer, uint64_t, uint64_t>> ranges;  // block, [offset, end)
  for (const Pair& p : pairs) {
    EXPECT_NE(p.file, nullptr);
    if (!p.file) continue;
    EXPECT_TRUE(p.device->buffer.valid());
    const vk::BufferView v = p.device->buffer.view();
    EXPECT_EQ(v.offset % alignment, 0u);
    EXPECT_EQ(v.offset % 256, 0u);
    EXPECT_GE(v.range, p.file->data.size());
    EXPECT_EQ(p.device->type, p.file->type);
    EXPECT_EQ(p.device->cols, p.file->shape[0]);
    EXPECT_EQ(p.device->rows, p.file->rows());
    const std::vector<std::byte> got = t.read(v.sub(0, p.file->data.size()));
    EXPECT_EQ(std::memcmp(got.data(), p.file->data.data(), got.size()), 0) << p.file->name;
    EXPECT_TRUE(std::any_of(
        g.blocks.begin(), g.blocks.end(),
        [&](const vk::Buffer& b) { return b.handle() == v.buffer && v.offset + v.range <= b.size(); }))
        << p.file->name << " lies outside every block";
    ranges.emplace_back(v.buffer, v.offset, v.offset + v.range);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (std::get<0>(ranges[i - 1]) == std::get<0>(ranges[i])) {
      EXPECT_LE(std::get<2>(ranges[i - 1]), std::get<1>(ranges[i])) << "overlap";
    }
  return g.blocks.size();
}

TEST_F(GpuWeightsTest, EveryTensorLandsByteExactInItsAlignedSliceOfAFewBlocks) {
  EXPECT_EQ(check_upload(*this, context(), kWeightBlockBytes), 1u) << "a tiny model fits one block";
}

TEST_F(GpuWeightsTest, SmallBlocksSplitTheModelAndStillHoldEveryTensorExactly) {
  // Blocks of 8 KiB: many blocks, the larger tensors alone in theirs.
  EXPECT_GT(check_upload(*this, context(), 8 << 10), 4u);
}

TEST_F(GpuWeightsTest, AFailedBlockAllocationThrowsAndLeaksNothing) {
  const auto path = synth::write_preset(test::scratch_dir() / "weights.gguf", "tiny", TensorType::Q8_0, 7);
  const GgufFile file = GgufFile::open(path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const ModelWeights w = ModelWeights::from_gguf(file, config);
  for (uint64_t n : {1u, 2u, 3u, 5u}) {
    SCOPED_TRACE("failing allocation " + std::to_string(n));
    vk::inject_allocation_failure(n);
    EXPECT_THROW(upload_weights(context(), w, config, 8 << 10), Error);
    vk::inject_allocation_failure(0);
    EXPECT_EQ(vk::live_allocation_count(), 0u);
  }
}

TEST_F(GpuWeightsTest, WeightTypesListsEachTypeOnce) {
  const auto path = synth::write_preset(test::scratch_dir() / "types.gguf", "tiny", TensorType::Q8_0, 3);
  const GgufFile file = GgufFile::open(path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const std::vector<TensorType> types = weight_types(ModelWeights::from_gguf(file, config));
  // Q8_0 matrices and F32 norms.
  EXPECT_EQ(types.size(), 2u);
  EXPECT_NE(std::find(types.begin(), types.end(), TensorType::Q8_0), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), TensorType::F32), types.end());
}

}  // namespace
}  // namespace kvtrie::engine
