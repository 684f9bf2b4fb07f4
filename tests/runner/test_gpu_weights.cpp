// upload_weights on lavapipe: every tensor of a synthetic model lands byte-exact in its block, at a
// binding-aligned offset, without overlapping another; small blocks are packed (a tiny model takes one
// block); weight_types lists each type of the model once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "bench/synthetic/synthetic_model.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/device.h"
#include "runner/engine/gpu_weights.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "tests/support/paths.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::engine {
namespace {

class GpuWeightsTest : public test::VulkanTest {
 protected:
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

TEST_F(GpuWeightsTest, EveryTensorLandsByteExactInItsAlignedSliceOfAFewBlocks) {
  const auto path = synth::write_preset(test::scratch_dir() / "weights.gguf", "tiny", TensorType::Q4_K, 7);
  const GgufFile file = GgufFile::open(path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const ModelWeights w = ModelWeights::from_gguf(file, config);
  const GpuWeights g = upload_weights(context(), w, config);
  EXPECT_EQ(g.blocks.size(), 1u) << "a tiny model fits one block";
  uint64_t block_bytes = 0;
  for (const vk::Buffer& b : g.blocks) block_bytes += b.size();
  EXPECT_EQ(g.bytes, block_bytes);

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
  const uint64_t alignment = context().device().info().min_storage_buffer_offset_alignment;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [offset, end) in the (single) block
  for (const Pair& p : pairs) {
    ASSERT_NE(p.file, nullptr);
    ASSERT_TRUE(p.device->buffer.valid());
    const vk::BufferView v = p.device->buffer.view();
    EXPECT_EQ(v.offset % alignment, 0u);
    EXPECT_EQ(v.offset % 256, 0u);
    EXPECT_GE(v.range, p.file->data.size());
    EXPECT_EQ(p.device->type, p.file->type);
    EXPECT_EQ(p.device->cols, p.file->shape[0]);
    EXPECT_EQ(p.device->rows, p.file->rows());
    const std::vector<std::byte> got = read(v.sub(0, p.file->data.size()));
    EXPECT_EQ(std::memcmp(got.data(), p.file->data.data(), got.size()), 0) << p.file->name;
    ranges.emplace_back(v.offset, v.offset + v.range);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "overlap";
  EXPECT_FALSE(g.rope_freqs.buffer.valid() && w.rope_freqs == nullptr);
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
