// The tensor-core matmul's fast weight loader (kernels/shaders/tile_decode.glsl) decodes every 16-value
// piece of Q4_0x8, Q8_0x8, Q6_Kx8, Q4_K and Q5_K rows to the CPU decoder's values rounded to f16, as the
// tiles hold them: within one f16 step of the value (one rounding of the exact value); the K-quants, decoded
// in f16 arithmetic with scale and offset rounded to f16 (tile_decode.glsl), within two more steps of the
// largest value of their 32-value group (the offset's magnitude, which a cancelling sum keeps). Run through a
// test shader (tile_decode.comp) so lavapipe checks it too: the matmul itself needs cooperative matrices.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops/kernels.h"
#include "kernels/ops/weight_format.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"
#include "kernels/vk/device.h"
#include "runner/model/quantization.h"
#include "tests/support/device_format.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class TileDecodeTest : public test::VulkanTest, public ::testing::WithParamInterface<TensorType> {};

TEST_P(TileDecodeTest, EveryPieceMatchesTheCpuDecoder) {
  if (!context().device().has_float16()) GTEST_SKIP() << "the device has no f16 arithmetic";
  const TensorType type = GetParam();
  const uint32_t rows = 5, cols = type == TensorType::Q6_Kx8 ? 4096 : 512;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  test::quantize_rows(type, rows, cols, random_floats(uint64_t{rows} * cols, -3.0f, 3.0f).data(), bytes,
                      values);
  vk::Buffer w = device_buffer(bytes);
  vk::Buffer out(context().device(), uint64_t{rows} * cols * 4, vk::MemoryKind::DeviceLocal);
  const vk::ComputePipeline& p =
      context().pipelines().get("tile_decode_" + std::string(type_variant(type)), {});
  struct Push {
    uint32_t rows, k, row_words;
  } push{rows, cols, static_cast<uint32_t>(row_bytes(type, cols) / 16)};
  vk::CommandRecorder rec(context());
  rec.begin();
  rec.dispatch(p, {vk::read(w.view()), vk::write(out.view())}, push, (rows * cols / 16 + 63) / 64);
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> got = read_back<float>(out, uint64_t{rows} * cols);
  // One f16 step at a magnitude.
  auto step = [](float x) {
    return std::ldexp(1.0f,
                      std::max(-24, static_cast<int>(std::floor(std::log2(std::abs(x) + 1e-30f))) - 10));
  };
  const bool kquant = type == TensorType::Q4_K || type == TensorType::Q5_K || type == TensorType::Q6_Kx8;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const float want = fp16_to_fp32(fp32_to_fp16(values[i]));
    float group_max = 0;
    for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j)
      group_max = std::max(group_max, std::abs(values[j]));
    const float tolerance = step(want) + (kquant ? 2 * step(group_max) : 0.0f);
    if (!(std::abs(got[i] - want) <= tolerance)) {
      ADD_FAILURE() << "row " << i / cols << " value " << i % cols << ": " << got[i] << ", CPU " << values[i];
      ++bad;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, TileDecodeTest,
                         ::testing::Values(TensorType::Q4_0x8, TensorType::Q8_0x8, TensorType::Q6_Kx8,
                                           TensorType::Q4_K, TensorType::Q5_K),
                         [](const auto& p) { return std::string(tensor_type_info(p.param).name); });

}  // namespace
}  // namespace kvtrie::kernels
