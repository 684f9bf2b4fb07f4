// matmul against a plain C++ reference for every weight type and path, with row and token counts that are
// not multiples of the tiles, plus batch invariance: the Deterministic path equals matvec bit for bit
// for every token, and the Tiled path gives a token the same bits alone and in a batch.
//
// Tolerances (relative to sum |w * x| of each output; the reference multiplies the exactly dequantized
// weights in double, so only the kernel's own rounding counts):
//   Tiled, Deterministic (f32 accumulation): 2e-5 for every type;
//   CoopMat (W and X rounded to f16, f32 accumulation): 2e-3 for every type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops/matmul.h"
#include "kernels/ops/ops.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/shader_registry.h"
#include "runner/model/quantization.h"
#include "tests/support/device_format.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

uint32_t test_cols(TensorType type) {
  const uint32_t block = tensor_type_info(type).block_elements;
  if (block == 1) return 101;  // not a multiple of the 32-wide k step: the k tail is zero-padded
  return block >= 256 ? 2 * block : 5 * 32;
}

// The CoopMat path reads x four floats at a time (rows of a multiple of 4 values, as every model's are):
// float types get 100 values, still not a multiple of the 32-wide k step.
uint32_t coopmat_cols(TensorType type) {
  return tensor_type_info(type).block_elements == 1 ? 100 : test_cols(type);
}

struct HostMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized: what the reference multiplies
};

HostMatrix random_matrix(TensorType type, uint32_t rows, uint32_t cols, const std::vector<float>& src) {
  HostMatrix m;
  test::quantize_rows(type, rows, cols, src.data(), m.bytes, m.values);
  return m;
}

// Checks y (tokens x rows) against sum_k w[r][k] x[t][k] computed in double.
void expect_matches_reference(const HostMatrix& w, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                              uint32_t tokens, const std::vector<float>& y, double tolerance) {
  int bad = 0;
  for (uint32_t t = 0; t < tokens && bad < 5; ++t)
    for (uint32_t r = 0; r < rows && bad < 5; ++r) {
      double s = 0, a = 0;
      for (uint32_t k = 0; k < cols; ++k) {
        const double p = double{w.values[uint64_t{r} * cols + k]} * x[uint64_t{t} * cols + k];
        s += p;
        a += std::abs(p);
      }
      const float got = y[uint64_t{t} * rows + r];
      if (!(std::abs(got - s) <= tolerance * a + 1e-7)) {
        ADD_FAILURE() << "y[" << t << "][" << r << "] = " << got << ", reference " << s;
        ++bad;
      }
    }
}

class MatmulTest : public test::VulkanTest, public ::testing::WithParamInterface<TensorType> {
 protected:
  std::vector<float> run(const vk::Buffer& w, TensorType type, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                         uint32_t tokens, MatmulPath path) {
    Kernels k(context(), Prewarm::No);
    vk::Buffer xb = device_buffer(x);
    vk::Buffer yb(context().device(), uint64_t{tokens} * rows * sizeof(float), vk::MemoryKind::DeviceLocal);
    vk::CommandRecorder rec(context());
    rec.begin();
    const MatmulArgs args{{w.view(0, row_bytes(type, cols) * rows), type, rows, cols}, xb.view(), yb.view(), tokens};
    if (path == MatmulPath::Auto)
      matvec(rec, k, args);  // Auto stands for "the matvec op itself" in these tests
    else
      matmul(rec, k, args, path);
    rec.end();
    rec.submit_and_wait();
    return read_back<float>(yb, uint64_t{tokens} * rows);
  }

  std::vector<float> token(const std::vector<float>& x, uint32_t cols, uint32_t t) {
    return {x.begin() + uint64_t{t} * cols, x.begin() + uint64_t{t + 1} * cols};
  }
};

TEST_P(MatmulTest, TiledAndDeterministicMatchReferenceWithTails) {
  const TensorType type = GetParam();
  const uint32_t rows = 67, cols = test_cols(type), tokens = 70;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  {
    SCOPED_TRACE("Tiled");
    expect_matches_reference(m, rows, cols, x, tokens, run(w, type, rows, cols, x, tokens, MatmulPath::Tiled), 2e-5);
  }
  {
    SCOPED_TRACE("Deterministic");
    expect_matches_reference(m, rows, cols, x, tokens,
                             run(w, type, rows, cols, x, tokens, MatmulPath::Deterministic), 2e-5);
  }
}

TEST_P(MatmulTest, DeterministicEqualsMatvecBitForBitForEveryToken) {
  const TensorType type = GetParam();
  const uint32_t rows = 23, cols = test_cols(type), tokens = 19;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  const std::vector<float> batch = run(w, type, rows, cols, x, tokens, MatmulPath::Deterministic);
  for (uint32_t t : {0u, 7u, 8u, 18u}) {
    const std::vector<float> alone = run(w, type, rows, cols, token(x, cols, t), 1, MatmulPath::Auto);
    EXPECT_EQ(std::memcmp(alone.data(), batch.data() + uint64_t{t} * rows, rows * sizeof(float)), 0)
        << "token " << t << ": matvec alone differs from the deterministic matmul of " << tokens << " tokens";
  }
}

TEST_P(MatmulTest, TiledGivesATokenTheSameBitsAloneAndInABatch) {
  const TensorType type = GetParam();
  const uint32_t rows = 67, cols = test_cols(type), tokens = 70;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  const std::vector<float> batch = run(w, type, rows, cols, x, tokens, MatmulPath::Tiled);
  for (uint32_t t : {0u, 45u, 69u}) {
    const std::vector<float> alone = run(w, type, rows, cols, token(x, cols, t), 1, MatmulPath::Tiled);
    EXPECT_EQ(std::memcmp(alone.data(), batch.data() + uint64_t{t} * rows, rows * sizeof(float)), 0)
        << "token " << t << " differs alone vs in a batch of " << tokens;
  }
}

TEST_P(MatmulTest, CoopMatMatchesReferenceWhereSupported) {
  const TensorType type = GetParam();
  EXPECT_NE(vk::find_spirv("matmul_coopmat_" + std::string(type_variant(type))), nullptr)
      << "the cooperative-matrix variant must be compiled and embedded on every build";
  if (!coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no VK_NV_cooperative_matrix";
  const uint32_t rows = 67, cols = coopmat_cols(type), tokens = 70;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  expect_matches_reference(m, rows, cols, x, tokens, run(w, type, rows, cols, x, tokens, MatmulPath::CoopMat), 2e-3);
}

// Tiles wholly inside Y are stored straight from the accumulators, edge tiles through shared memory: rows
// and tokens of two whole 128-wide tiles plus a tail exercise both stores and the tile loop.
TEST_P(MatmulTest, CoopMatWholeAndEdgeTilesMatchReference) {
  const TensorType type = GetParam();
  if (!coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no VK_NV_cooperative_matrix";
  const uint32_t rows = 2 * CoopmatTile{}.rows() + 3, cols = test_cols(type),
                 tokens = 2 * CoopmatTile{}.tokens() + 7;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  expect_matches_reference(m, rows, cols, x, tokens, run(w, type, rows, cols, x, tokens, MatmulPath::CoopMat),
                           2e-3);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::BF16,
                                           TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1,
                                           TensorType::Q5_0, TensorType::Q5_1, TensorType::Q4_K,
                                           TensorType::Q5_K, TensorType::Q6_K, TensorType::Q4_0x8,
                                           TensorType::Q8_0x8, TensorType::Q6_Kx8),
                         [](const auto& p) { return std::string(tensor_type_info(p.param).name); });

class MatmulPathTest : public test::VulkanTest {};

// Auto takes matvec for up to 32 tokens, above that cooperative matrices where the device has them and x
// rows are 16-byte aligned, else tiles; an explicit CoopMat request on a device without them is an error,
// not a silent fallback.
TEST_F(MatmulPathTest, AutoResolvesByTokenCountAndAlignment) {
  const vk::Device& device = context().device();
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, 1, 4096), MatmulPath::Deterministic);
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, 32, 4096), MatmulPath::Deterministic);
  const MatmulPath tiles = coopmat_supported(device) ? MatmulPath::CoopMat : MatmulPath::Tiled;
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, 33, 4096), tiles);
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, 512, 4096), tiles);
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, 512, 4097), MatmulPath::Tiled);
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Deterministic, 512, 4096), MatmulPath::Deterministic);
  if (!coopmat_supported(device)) {
    EXPECT_THROW(resolve_matmul_path(device, MatmulPath::CoopMat, 512, 4096), Error);
  }
}

}  // namespace
}  // namespace kvtrie::kernels
