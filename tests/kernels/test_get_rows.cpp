// get_rows (embedding lookup) for every tensor type against runner/model/quantization.h's dequantize_row:
// random rows quantized on the CPU, looked up on the GPU, compared value by value. Float types must be
// exact; quantized types within 1e-5 relative (the GPU may fuse the scale multiply-add).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>

#include "kernels/ops/get_rows.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/ops/quantized_x.h"
#include "runner/model/quantization.h"
#include "tests/support/device_format.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class GetRows : public test::VulkanTest, public ::testing::WithParamInterface<TensorType> {};

uint32_t row_length(TensorType type) {
  const uint32_t block = tensor_type_info(type).block_elements;
  if (block == 1) return 417;       // odd: F16/BF16 rows are not 4-byte aligned
  if (block == 32) return 32 * 13;  // Q4_0 rows of 13 blocks: 234 bytes, not aligned
  return block * 3;
}

TEST_P(GetRows, LooksUpRowsOfAChunkedTableExactlyAsTheCpuDequantizes) {
  const TensorType type = GetParam();
  const uint32_t n = row_length(type), rows = 11, n_tokens = 7;
  const uint64_t rb = row_bytes(type, n);
  std::vector<uint8_t> table;
  std::vector<float> dequant;
  const std::vector<float> values = random_floats(size_t{n} * rows, -2.0f, 2.0f);
  test::quantize_rows(type, rows, n, values.data(), table, dequant);
  std::vector<int32_t> ids(n_tokens);
  std::uniform_int_distribution<int32_t> pick(0, rows - 1);
  for (int32_t& id : ids) id = pick(rng());
  ids[0] = 0;
  ids[1] = rows - 1;
  ids[2] = ids[3];  // a repeated token

  vk::Buffer bt = device_buffer(table), bi = device_buffer(ids);
  vk::Buffer bo = device_buffer(std::vector<float>(size_t{n} * n_tokens, -99.0f));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  // Two chunks, as a caller splits a table larger than a binding: rows [0, 6) and [6, 11). The second
  // chunk starts at an unaligned byte offset.
  for (auto [begin, count] : {std::pair<uint32_t, uint32_t>{0, 6}, {6, rows - 6}}) {
    GetRowsArgs a;
    a.table = bt.view(begin * rb, count * rb);
    a.type = type;
    a.n = n;
    a.row_begin = begin;
    a.row_count = count;
    a.ids = bi.view(0, n_tokens * 4);
    a.out = bo.view(0, size_t{n} * n_tokens * 4);
    a.n_tokens = n_tokens;
    get_rows(rec, k, a);
  }
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> got = read_back<float>(bo, size_t{n} * n_tokens);
  const bool exact = tensor_type_info(type).block_elements == 1;
  for (uint32_t t = 0; t < n_tokens; ++t)
    for (uint32_t c = 0; c < n; ++c) {
      const float want = dequant[static_cast<size_t>(ids[t]) * n + c];
      const float have = got[size_t{t} * n + c];
      if (exact)
        ASSERT_EQ(have, want) << "token " << t << " value " << c;
      else
        ASSERT_NEAR(have, want, 1e-5f * std::max(1.0f, std::fabs(want))) << "token " << t << " value " << c;
    }
}

// With a quantized copy: the rows as the plain lookup writes them, and their normed, quantized copy (bytes,
// scales, sums of squares) bit for bit as quantize_q8 with the norm writes it from those rows.
TEST_P(GetRows, QuantizedCopyIsQuantizeQ8OfTheRowsBitForBit) {
  const TensorType type = GetParam();
  const uint32_t block = tensor_type_info(type).block_elements;
  const uint32_t n = block == 1 ? 16 * 29 : std::lcm(block, 16u) * 3, rows = 9, n_tokens = 5, stride = n + 32;
  std::vector<uint8_t> table;
  std::vector<float> dequant;
  test::quantize_rows(type, rows, n, random_floats(size_t{n} * rows, -2.0f, 2.0f).data(), table, dequant);
  const std::vector<int32_t> ids = {3, 0, 8, 3, 5};
  vk::Buffer bt = device_buffer(table), bi = device_buffer(ids);
  vk::Buffer bn = device_buffer(random_floats(n, 0.5f, 1.5f));
  const vk::Device& dev = context().device();
  const QuantizedBuffers fused(dev, n_tokens, stride, true), separate(dev, n_tokens, stride, true);
  vk::Buffer fused_x = device_buffer(std::vector<float>(size_t{n} * n_tokens, -99.0f));
  vk::Buffer plain_x = device_buffer(std::vector<float>(size_t{n} * n_tokens, -99.0f));
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  // Two chunks, as in the plain lookup: each writes the copies of its own tokens.
  for (auto [begin, count] : {std::pair<uint32_t, uint32_t>{0, 4}, {4, rows - 4}}) {
    GetRowsArgs a;
    a.table = bt.view(begin * row_bytes(type, n), count * row_bytes(type, n));
    a.type = type;
    a.n = n;
    a.row_begin = begin;
    a.row_count = count;
    a.ids = bi.view();
    a.n_tokens = n_tokens;
    a.out = plain_x.view();
    get_rows(rec, k, a);
    a.out = fused_x.view();
    a.quantized_out = fused.view();
    a.norm_weight = bn.view();
    get_rows(rec, k, a);
  }
  QuantizeQ8Args q;
  q.x = plain_x.view();
  q.tokens = n_tokens;
  q.cols = n;
  q.norm_weight = bn.view();
  q.out = separate.view();
  quantize_q8(rec, k, q);
  rec.end();
  rec.submit_and_wait();
  EXPECT_EQ(read_back<float>(fused_x, size_t{n} * n_tokens), read_back<float>(plain_x, size_t{n} * n_tokens));
  const size_t groups = size_t{n_tokens} * stride / 16;
  auto written = [&](const vk::Buffer& b, size_t per_group) {
    const std::vector<uint32_t> all = read_back<uint32_t>(b, per_group * groups);
    std::vector<uint32_t> out;
    for (size_t g = 0; g < groups; ++g)
      if (g % (stride / 16) < n / 16)
        out.insert(out.end(), all.begin() + g * per_group, all.begin() + (g + 1) * per_group);
    return out;
  };
  EXPECT_EQ(written(fused.bytes, 4), written(separate.bytes, 4));
  EXPECT_EQ(written(fused.scales, 2), written(separate.scales, 2));
  EXPECT_EQ(written(fused.sum_squares, 1), written(separate.sum_squares, 1));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GetRows,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::BF16,
                                           TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1,
                                           TensorType::Q5_0, TensorType::Q5_1, TensorType::Q4_K,
                                           TensorType::Q5_K, TensorType::Q6_K, TensorType::Q4_0x8,
                                           TensorType::Q8_0x8, TensorType::Q6_Kx8),
                         [](const ::testing::TestParamInfo<TensorType>& p) {
                           return std::string(tensor_type_info(p.param).name);
                         });

}  // namespace
}  // namespace kvtrie::kernels
