// matvec against a plain C++ reference for every weight type, on random inputs with odd sizes, plus the
// batch-invariance contract (a token alone and in a batch give bit-identical results).
//
// Tolerance: the reference multiplies the exactly dequantized weights (dequantize_row, the CPU decoder) in
// double, so the only error left is the GPU's f32 accumulation order: |gpu - ref| <= 2e-5 * sum |w * x|
// for every type (F32, F16, BF16 and the block types alike; the weight precision is not part of it).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ops/matvec.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/staging.h"
#include "runner/model/quantization.h"
#include "tests/support/device_format.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

constexpr double kTolerance = 2e-5;

// Row length for a type: an odd number of blocks, and for the float types a length that is not a multiple
// of 8 (the shader's decode group) so the tail path runs; F16/BF16 rows are then not 4-byte aligned.
uint32_t test_cols(TensorType type) {
  const uint32_t block = tensor_type_info(type).block_elements;
  if (block == 1) return 203;
  return block >= 256 ? 3 * block : 7 * 32;
}

struct HostMatrix {
  std::vector<uint8_t> bytes;  // GGUF rows
  std::vector<float> values;   // the same rows dequantized: what the reference multiplies
};

HostMatrix random_matrix(TensorType type, uint32_t rows, uint32_t cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> src(uint64_t{rows} * cols);
  for (float& v : src) v = dist(rng);
  HostMatrix m;
  test::quantize_rows(type, rows, cols, src.data(), m.bytes, m.values);
  return m;
}

std::vector<float> random_vector(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The reference: y[t][r] = sum_k w[r][k] x[t][k] in double, and the scale sum_k |w x| for the tolerance.
void reference(const HostMatrix& w, uint32_t rows, uint32_t cols, const std::vector<float>& x,
               uint32_t tokens, std::vector<double>& y, std::vector<double>& scale) {
  y.assign(uint64_t{tokens} * rows, 0.0);
  scale.assign(y.size(), 0.0);
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint32_t r = 0; r < rows; ++r) {
      double s = 0, a = 0;
      for (uint32_t k = 0; k < cols; ++k) {
        const double p = double{w.values[uint64_t{r} * cols + k]} * x[uint64_t{t} * cols + k];
        s += p;
        a += std::abs(p);
      }
      y[uint64_t{t} * rows + r] = s;
      scale[uint64_t{t} * rows + r] = a;
    }
}

class MatvecTest : public test::VulkanTest, public ::testing::WithParamInterface<TensorType> {
 protected:
  // Runs matvec on the device for `tokens` vectors of x and returns y.
  std::vector<float> run(const vk::Buffer& w, TensorType type, uint32_t rows, uint32_t cols,
                         const std::vector<float>& x, uint32_t tokens, bool single_token_build = false) {
    Kernels k(context(), Prewarm::No);
    vk::Buffer xb = device_buffer(x);
    vk::Buffer yb(context().device(), uint64_t{tokens} * rows * sizeof(float), vk::MemoryKind::DeviceLocal);
    vk::CommandRecorder rec(context());
    rec.begin();
    const MatmulArgs args{
        {w.view(0, row_bytes(type, cols) * rows), type, rows, cols}, xb.view(), yb.view(), tokens};
    if (single_token_build)
      matvec_single_token(rec, k, args);
    else
      matvec(rec, k, args);
    rec.end();
    rec.submit_and_wait();
    return vk::download<float>(context(), yb, uint64_t{tokens} * rows);
  }
};

TEST_P(MatvecTest, MatchesReferenceForOneAndSeveralTokens) {
  const TensorType type = GetParam();
  const uint32_t rows = 37, cols = test_cols(type);
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  vk::Buffer w = device_buffer(m.bytes);
  for (uint32_t tokens : {1u, 3u, 8u, 11u}) {
    SCOPED_TRACE(std::string(tensor_type_info(type).name) + " tokens " + std::to_string(tokens));
    const std::vector<float> x = random_vector(uint64_t{tokens} * cols, rng());
    const std::vector<float> y = run(w, type, rows, cols, x, tokens);
    std::vector<double> ref, scale;
    reference(m, rows, cols, x, tokens, ref, scale);
    int bad = 0;
    for (size_t i = 0; i < y.size() && bad < 5; ++i)
      if (!(std::abs(y[i] - ref[i]) <= kTolerance * scale[i] + 1e-7)) {
        ADD_FAILURE() << "y[" << i / rows << "][" << i % rows << "] = " << y[i] << ", reference " << ref[i];
        ++bad;
      }
  }
}

// Rows of whole 16-byte pieces, as real models have: float rows then take the 16-byte loads of W and x
// (the test_cols rows above mostly take the word-at-a-time path). Against the reference, through both
// builds, and a token alone bit-identical to the same token in a batch.
TEST_P(MatvecTest, AlignedRowsMatchReferenceAndAreBatchInvariant) {
  const TensorType type = GetParam();
  const uint32_t rows = 21, tokens = 9;
  const uint32_t cols = tensor_type_info(type).block_elements == 1 ? 264 : test_cols(type);
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_vector(uint64_t{tokens} * cols, rng());
  const std::vector<float> batch = run(w, type, rows, cols, x, tokens);
  std::vector<double> ref, scale;
  reference(m, rows, cols, x, tokens, ref, scale);
  for (size_t i = 0; i < batch.size(); ++i)
    ASSERT_LE(std::abs(batch[i] - ref[i]), kTolerance * scale[i] + 1e-7)
        << "y[" << i / rows << "][" << i % rows << "]";
  const std::vector<float> first(x.begin(), x.begin() + cols);
  const std::vector<float> alone = run(w, type, rows, cols, first, 1);
  EXPECT_EQ(std::memcmp(alone.data(), batch.data(), rows * sizeof(float)), 0)
      << "token 0 alone vs in a batch";
  const std::vector<float> single = run(w, type, rows, cols, first, 1, true);
  for (uint32_t r = 0; r < rows; ++r)
    EXPECT_LE(std::abs(single[r] - ref[r]), kTolerance * scale[r] + 1e-7) << "single-token build, row " << r;
}

// The decode step's product (matvec_single_token: for Q4_0 a different build from matvec's) against the
// same reference, with row counts that do not fill a work group.
TEST_P(MatvecTest, SingleTokenBuildMatchesReference) {
  const TensorType type = GetParam();
  for (uint32_t rows : {1u, 37u}) {
    const uint32_t cols = test_cols(type);
    const HostMatrix m = random_matrix(type, rows, cols, rng());
    vk::Buffer w = device_buffer(m.bytes);
    const std::vector<float> x = random_vector(cols, rng());
    const std::vector<float> y = run(w, type, rows, cols, x, 1, true);
    std::vector<double> ref, scale;
    reference(m, rows, cols, x, 1, ref, scale);
    for (uint32_t r = 0; r < rows; ++r)
      EXPECT_LE(std::abs(y[r] - ref[r]), kTolerance * scale[r] + 1e-7) << "rows " << rows << " row " << r;
  }
}

// The SwiGLU build: y = W (silu(gate) * up), the FFN down projection with the activation folded in.
TEST_P(MatvecTest, SwigluSingleTokenMatchesReference) {
  const TensorType type = GetParam();
  const uint32_t rows = 37, cols = test_cols(type);
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  std::vector<float> gate = random_vector(cols, rng()), up = random_vector(cols, rng());
  for (float& g : gate) g *= 4.0f;  // reach both tails of silu
  std::vector<float> x(cols);
  for (uint32_t i = 0; i < cols; ++i)
    x[i] = static_cast<float>(gate[i] / (1.0 + std::exp(-double{gate[i]})) * up[i]);
  vk::Buffer w = device_buffer(m.bytes), bg = device_buffer(gate), bu = device_buffer(up);
  vk::Buffer by(context().device(), rows * sizeof(float), vk::MemoryKind::DeviceLocal);
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  matvec_single_token_swiglu(
      rec, k,
      {{w.view(0, row_bytes(type, cols) * rows), type, rows, cols}, bg.view(0, cols * 4), by.view(), 1},
      bu.view(0, cols * 4));
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> y = vk::download<float>(context(), by, rows);
  std::vector<double> ref, scale;
  reference(m, rows, cols, x, 1, ref, scale);
  for (uint32_t r = 0; r < rows; ++r)
    EXPECT_LE(std::abs(y[r] - ref[r]), kTolerance * scale[r] + 1e-7) << "row " << r;
}

TEST_P(MatvecTest, TokenAloneAndInBatchAreBitIdentical) {
  const TensorType type = GetParam();
  const uint32_t rows = 29, cols = test_cols(type), tokens = 11;
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_vector(uint64_t{tokens} * cols, rng());
  const std::vector<float> batch = run(w, type, rows, cols, x, tokens);
  // Token 5 sits in the first group of 8 at slot 5, token 9 in the second group at slot 1.
  for (uint32_t t : {0u, 5u, 9u}) {
    const std::vector<float> one(x.begin() + uint64_t{t} * cols, x.begin() + uint64_t{t + 1} * cols);
    const std::vector<float> alone = run(w, type, rows, cols, one, 1);
    EXPECT_EQ(std::memcmp(alone.data(), batch.data() + uint64_t{t} * rows, rows * sizeof(float)), 0)
        << "token " << t << " differs alone vs in a batch of " << tokens;
  }
}

// The weight view starts at an offset that no device aligns storage buffers to (the op binds an aligned-down
// range and passes the byte offset to the shader), and x / y are strided (rows of wider activations).
TEST_P(MatvecTest, UnalignedWeightViewAndStridedActivations) {
  const TensorType type = GetParam();
  const uint32_t rows = 13, cols = test_cols(type), tokens = 3;
  const uint32_t x_stride = cols + 4, y_stride = rows + 3;
  const uint64_t offset = 6;
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  std::vector<uint8_t> shifted(offset + m.bytes.size(), 0xAB);
  std::memcpy(shifted.data() + offset, m.bytes.data(), m.bytes.size());
  vk::Buffer w = device_buffer(shifted);
  const std::vector<float> xs = random_vector(uint64_t{tokens} * x_stride, rng());
  Kernels k(context(), Prewarm::No);
  vk::Buffer xb = device_buffer(xs);
  vk::Buffer yb = device_buffer(std::vector<float>(uint64_t{tokens} * y_stride, -7.0f));
  vk::CommandRecorder rec(context());
  rec.begin();
  matvec(
      rec, k,
      {{w.view(offset, m.bytes.size()), type, rows, cols}, xb.view(), yb.view(), tokens, x_stride, y_stride});
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> y = read_back<float>(yb, uint64_t{tokens} * y_stride);
  std::vector<float> x(uint64_t{tokens} * cols);
  for (uint32_t t = 0; t < tokens; ++t)
    std::copy_n(xs.begin() + uint64_t{t} * x_stride, cols, x.begin() + uint64_t{t} * cols);
  std::vector<double> ref, scale;
  reference(m, rows, cols, x, tokens, ref, scale);
  for (uint32_t t = 0; t < tokens; ++t) {
    for (uint32_t r = 0; r < rows; ++r) {
      const size_t i = uint64_t{t} * rows + r;
      EXPECT_LE(std::abs(y[uint64_t{t} * y_stride + r] - ref[i]), kTolerance * scale[i] + 1e-7)
          << "t " << t << " r " << r;
    }
    for (uint32_t r = rows; r < y_stride; ++r)
      EXPECT_EQ(y[uint64_t{t} * y_stride + r], -7.0f) << "padding overwritten";
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatvecTest,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::BF16,
                                           TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1,
                                           TensorType::Q5_0, TensorType::Q5_1, TensorType::Q4_K,
                                           TensorType::Q5_K, TensorType::Q6_K, TensorType::Q4_0x8,
                                           TensorType::Q8_0x8, TensorType::Q6_Kx8),
                         [](const auto& p) { return std::string(tensor_type_info(p.param).name); });

// matvec_fused (float weights): the norm, the SwiGLU and the residual add folded into the product, against
// the reference of the unfused steps, on aligned rows (the 16-byte loads) and odd ones; and a batch gives
// each token the bits of that token alone (the --deterministic contract).
class FusedMatvecTest : public test::VulkanTest, public ::testing::WithParamInterface<TensorType> {
 protected:
  // `tokens` tokens of x (cols values each) and of y0 (the output rows each).
  std::vector<float> run(const HostMatrix& m, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                         const std::vector<float>& norm, bool swiglu, std::vector<float> y0,
                         uint32_t tokens = 1) {
    const TensorType type = GetParam();
    Kernels k(context(), Prewarm::No);
    vk::Buffer w = device_buffer(m.bytes);
    vk::Buffer xb = device_buffer(x), yb = device_buffer(y0);
    vk::Buffer nb = device_buffer(norm.empty() ? std::vector<float>(1) : norm);
    FusedMatvecArgs a;
    a.w = {w.view(0, row_bytes(type, cols) * rows), type, rows, cols};
    a.x = xb.view();
    a.y = yb.view();
    if (!norm.empty()) a.norm = nb.view(), a.eps = 1e-5f;
    a.swiglu = swiglu;
    a.accumulate = norm.empty();
    a.tokens = tokens;
    // A batch's norm: scratch for x times the norm's weights and each token's sum of squares.
    vk::Buffer normed(context().device(), uint64_t{tokens} * cols * 4 + 16, vk::MemoryKind::DeviceLocal),
        sums(context().device(), uint64_t{tokens} * 4 + 16, vk::MemoryKind::DeviceLocal);
    a.normed_x = normed.view();
    a.norm_sums = sums.view();
    vk::CommandRecorder rec(context());
    rec.begin();
    matvec_fused(rec, k, a);
    rec.end();
    rec.submit_and_wait();
    return vk::download<float>(context(), yb, y0.size());
  }
};

TEST_P(FusedMatvecTest, NormSwigluAndAccumulateMatchTheUnfusedSteps) {
  const TensorType type = GetParam();
  for (uint32_t cols : {264u, 203u}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const uint32_t rows = 38;  // 19 gate rows and 19 up rows with swiglu
    const HostMatrix m = random_matrix(type, rows, cols, rng());
    const std::vector<float> x = random_vector(cols, rng()), norm = random_vector(cols, rng());
    double ss = 0;
    for (float v : x) ss += double{v} * v;
    const double inv_rms = 1 / std::sqrt(ss / cols + 1e-5);
    std::vector<float> normed(cols);
    for (uint32_t i = 0; i < cols; ++i) normed[i] = static_cast<float>(x[i] * inv_rms * norm[i]);
    std::vector<double> ref, scale;
    reference(m, rows, cols, normed, 1, ref, scale);
    const std::vector<float> y = run(m, rows, cols, x, norm, false, std::vector<float>(rows, -7.0f));
    for (uint32_t r = 0; r < rows; ++r)
      EXPECT_LE(std::abs(y[r] - ref[r]), 1e-4 * scale[r] + 1e-6) << "norm, row " << r;
    const std::vector<float> sw = run(m, rows, cols, x, norm, true, std::vector<float>(rows / 2, -7.0f));
    for (uint32_t r = 0; r < rows / 2; ++r) {
      const double g = ref[r], u = ref[r + rows / 2];
      const double want = g / (1 + std::exp(-g)) * u;
      const double tol = 1e-4 * (std::abs(u) * scale[r] + std::abs(g) * scale[r + rows / 2]) + 1e-6;
      EXPECT_LE(std::abs(sw[r] - want), tol) << "swiglu, row " << r;
    }
    std::vector<double> plain;
    reference(m, rows, cols, x, 1, plain, scale);
    const std::vector<float> y0 = random_vector(rows, rng());
    const std::vector<float> acc = run(m, rows, cols, x, {}, false, y0);
    for (uint32_t r = 0; r < rows; ++r)
      EXPECT_LE(std::abs(acc[r] - (y0[r] + plain[r])), kTolerance * scale[r] + 1e-6)
          << "accumulate, row " << r;
  }
}

TEST_P(FusedMatvecTest, BatchesGiveEachTokenTheBitsOfItsOneTokenProduct) {
  const TensorType type = GetParam();
  const uint32_t rows = 38, cols = 264;
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  const std::vector<float> norm = random_vector(cols, rng());
  for (uint32_t tokens : {3u, 8u, 11u}) {  // 11: a second group of 8 tokens, partly filled
    const std::vector<float> x = random_vector(tokens * cols, rng());
    for (int mode = 0; mode < 3; ++mode) {  // norm, norm with swiglu, accumulate
      SCOPED_TRACE("tokens " + std::to_string(tokens) + " mode " + std::to_string(mode));
      const bool swiglu = mode == 1;
      const std::vector<float> n = mode == 2 ? std::vector<float>{} : norm;
      const uint32_t out = swiglu ? rows / 2 : rows;
      const std::vector<float> y0 = random_vector(tokens * out, rng());
      const std::vector<float> batch = run(m, rows, cols, x, n, swiglu, y0, tokens);
      for (uint32_t t = 0; t < tokens; ++t) {
        const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const std::vector<float> y0t(y0.begin() + t * out, y0.begin() + (t + 1) * out);
        const std::vector<float> alone = run(m, rows, cols, xt, n, swiglu, y0t);
        for (uint32_t r = 0; r < out; ++r)
          ASSERT_EQ(std::bit_cast<uint32_t>(batch[t * out + r]), std::bit_cast<uint32_t>(alone[r]))
              << "token " << t << " row " << r << ": " << batch[t * out + r] << " in the batch, " << alone[r]
              << " alone";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, FusedMatvecTest,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::BF16),
                         [](const auto& p) { return std::string(tensor_type_info(p.param).name); });

// split_rows: chunks cover every row once, in order, and each (plus the alignment slack in front of an
// aligned-down binding and word rounding) fits the binding range.
TEST(MatvecSplitRows, ChunksCoverAllRowsAndFitTheRange) {
  for (TensorType type : {TensorType::Q4_0, TensorType::Q6_K, TensorType::F16}) {
    const uint32_t cols = tensor_type_info(type).block_elements == 256 ? 512 : 64;
    const WeightMatrix w{{}, type, 1001, cols};
    const uint64_t rb = row_bytes(type, cols);
    const uint64_t max_range = rb * 100 + 7;
    const std::vector<RowChunk> chunks = split_rows(w, max_range, 64);
    EXPECT_GT(chunks.size(), 10u);
    uint32_t next = 0;
    for (const RowChunk& c : chunks) {
      EXPECT_EQ(c.first_row, next);
      EXPECT_GT(c.rows, 0u);
      EXPECT_LE(c.rows * rb + 64 + 4, max_range);
      next += c.rows;
    }
    EXPECT_EQ(next, 1001u);
    EXPECT_EQ(split_rows(w, rb * 1001 + 68, 64).size(), 1u);
  }
}

}  // namespace
}  // namespace kvtrie::kernels
