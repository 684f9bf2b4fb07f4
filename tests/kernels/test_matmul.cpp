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
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/ops/convert.h"
#include "kernels/ops/matmul.h"
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
  // y of the product `record` records for w (rows x cols of `type`) and `tokens` rows of x.
  template <typename Record>
  std::vector<float> run_product(const vk::Buffer& w, TensorType type, uint32_t rows, uint32_t cols,
                                 const std::vector<float>& x, uint32_t tokens, Record record) {
    Kernels k(context(), Prewarm::No);
    vk::Buffer xb = device_buffer(x);
    vk::Buffer yb(context().device(), uint64_t{tokens} * rows * sizeof(float), vk::MemoryKind::DeviceLocal);
    vk::CommandRecorder rec(context());
    rec.begin();
    record(rec, k,
           MatmulArgs{
               {w.view(0, row_bytes(type, cols) * rows), type, rows, cols}, xb.view(), yb.view(), tokens});
    rec.end();
    rec.submit_and_wait();
    return read_back<float>(yb, uint64_t{tokens} * rows);
  }

  std::vector<float> run(const vk::Buffer& w, TensorType type, uint32_t rows, uint32_t cols,
                         const std::vector<float>& x, uint32_t tokens, MatmulPath path) {
    return run_product(w, type, rows, cols, x, tokens,
                       [&](vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& a) {
                         if (path == MatmulPath::Auto)
                           matvec(rec, k, a);  // Auto stands for "the matvec op itself" in these tests
                         else
                           matmul(rec, k, a, path);
                       });
  }

  // The CoopMat product of a random rows x coopmat_cols(type) matrix and `tokens` tokens against the
  // reference: through matmul(), or through a pipeline built for `tile`.
  void check_coopmat(TensorType type, uint32_t rows, uint32_t tokens, std::optional<CoopmatTile> tile = {}) {
    const uint32_t cols = coopmat_cols(type);
    const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
    vk::Buffer w = device_buffer(m.bytes);
    const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
    if (!tile) {
      expect_matches_reference(m, rows, cols, x, tokens,
                               run(w, type, rows, cols, x, tokens, MatmulPath::CoopMat), 2e-3);
      return;
    }
    const std::string shader =
        std::string(coopmat_uses_khr(context().device()) ? "matmul_coopmat_khr_" : "matmul_coopmat_") +
        std::string(type_variant(type));
    const vk::ComputePipeline& pipeline = context().pipelines().get(shader, tile->spec());
    expect_matches_reference(
        m, rows, cols, x, tokens,
        run_product(w, type, rows, cols, x, tokens,
                    [&](vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& a) {
                      dispatch_matmul_coopmat(rec, k, a, pipeline, *tile);
                    }),
        2e-3);
  }

  // x rounded to f16 on the host, in a device buffer.
  vk::Buffer half_buffer(const std::vector<float>& x) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
    return device_buffer(h);
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
    expect_matches_reference(m, rows, cols, x, tokens, run(w, type, rows, cols, x, tokens, MatmulPath::Tiled),
                             2e-5);
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
    GTEST_SKIP() << "device " << context().device().info().name << " has no cooperative matrices";
  check_coopmat(type, 67, 70);
}

// Tiles wholly inside Y are stored straight from the accumulators, edge tiles through shared memory: rows
// and tokens of two whole 128-wide tiles plus a tail exercise both stores and the tile loop.
TEST_P(MatmulTest, CoopMatWholeAndEdgeTilesMatchReference) {
  if (!coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no cooperative matrices";
  check_coopmat(GetParam(), 2 * CoopmatTile{}.rows() + 3, 2 * CoopmatTile{}.tokens() + 7);
}

// Up to 32 tokens the CoopMat path takes its 32-token tile (kSmallTile): a whole tile and a tail of rows.
TEST_P(MatmulTest, CoopMatSmallTileMatchesReference) {
  if (!coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no cooperative matrices";
  check_coopmat(GetParam(), 2 * kSmallTile.rows() + 5, 29);
}

// Deeper k steps (bk 64) with one shared buffer and with two, as the tuning harness tries them: the row
// length of the quantized types (160) leaves a partial last step, whose missing blocks must read as zeros.
TEST_P(MatmulTest, CoopMatDeepStepTilesMatchReference) {
  if (!coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no cooperative matrices";
  for (const CoopmatTile tile : {CoopmatTile{4, 2, 2, 4, 64, 1}, CoopmatTile{2, 2, 2, 2, 64, 2}}) {
    SCOPED_TRACE("bk " + std::to_string(tile.bk) + ", buffers " + std::to_string(tile.buffers));
    check_coopmat(GetParam(), 131, 70, tile);
  }
}

// The KHR build reads x as f16 where the caller gives it (MatmulArgs::x_f16, converted on the device by
// convert_f16) and rows are whole groups of 8 values: whole and edge tiles through matmul() (kF16XTile, k
// steps of 64 whose partial last step must read zeros past k), and the two-buffer tile of 32-value steps.
// Rows of another length keep the f32 read.
TEST_P(MatmulTest, CoopMatReadsF16XWhereItTakesIt) {
  const vk::Device& device = context().device();
  if (!coopmat_supported(device))
    GTEST_SKIP() << "device " << device.info().name << " has no cooperative matrices";
  const TensorType type = GetParam();
  const bool float_type = tensor_type_info(type).block_elements == 1;
  const uint32_t cols = float_type ? 104 : coopmat_cols(type);  // 104: groups of 8, not of 32
  const uint32_t rows = 2 * CoopmatTile{}.rows() + 3, tokens = CoopmatTile{}.tokens() + 7;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  vk::Buffer x16(device, x.size() * 2, vk::MemoryKind::DeviceLocal);
  const bool khr = coopmat_uses_khr(device);
  const auto with_f16_x = [&](auto product) {
    return [&, product](vk::CommandRecorder& rec, const Kernels& k, MatmulArgs a) {
      convert_f16(rec, k, a.x, x16.view(), tokens * cols);
      a.x_f16 = x16.view();
      EXPECT_EQ(coopmat_takes_f16_x(device, a), khr);
      product(rec, k, a);
    };
  };
  expect_matches_reference(
      m, rows, cols, x, tokens,
      run_product(w, type, rows, cols, x, tokens,
                  with_f16_x([](auto& rec, auto& k, auto& a) { matmul(rec, k, a, MatmulPath::CoopMat); })),
      2e-3);
  if (khr) {
    const CoopmatTile other{};
    static_assert(CoopmatTile{}.bk != kF16XTile.bk, "the explicit tile must differ from matmul()'s");
    const vk::ComputePipeline& pipeline =
        context().pipelines().get("matmul_coopmat_khr_xh_" + std::string(type_variant(type)), other.spec());
    expect_matches_reference(
        m, rows, cols, x, tokens,
        run_product(w, type, rows, cols, x, tokens, with_f16_x([&](auto& rec, auto& k, auto& a) {
                      MatmulArgs f16 = a;
                      f16.x = a.x_f16;
                      dispatch_matmul_coopmat(rec, k, f16, pipeline, other);
                    })),
        2e-3);
  }
  if (float_type) {
    MatmulArgs odd{{w.view(), type, rows, 100}, {}, {}, tokens};
    odd.x_f16 = x16.view();
    EXPECT_FALSE(coopmat_takes_f16_x(device, odd)) << "rows of 100 values are not whole groups of 8";
  }
}

// The x-as-f16 build's other tiles against the reference: the wide one (kF16XWideTile: 128 rows x 256 tokens)
// unsplit and split in two, through dispatch_matmul_coopmat on a small product (f16x_plan gives it only to
// large ones: TheWideTileGoesToLargeProductsOfWholeTokenTiles; GpuModelTest runs it through matmul() in an
// llama3-8b-sized layer), 492 tokens (the second token tile partial), rows ending inside a tile; and the
// narrow one (128 x 64) through matmul().
TEST_P(MatmulTest, CoopMatWideAndNarrowTilesMatchReference) {
  const vk::Device& device = context().device();
  if (!coopmat_khr_path(device))
    GTEST_SKIP() << "device " << device.info().name << " has no KHR cooperative matrices (the f16-x build)";
  const TensorType type = GetParam();
  const vk::ComputePipeline& wide = context().pipelines().get(
      "matmul_coopmat_khr_xh_" + std::string(type_variant(type)), kF16XWideTile.spec());
  // 0: wide; 1: wide split in two; 2: narrow through matmul() (3 x 2 tiles of 128 x 64).
  for (const uint32_t form : {0u, 1u, 2u}) {
    SCOPED_TRACE(form == 0 ? "wide" : form == 1 ? "wide, 2 k splits" : "narrow");
    const bool float_type = tensor_type_info(type).block_elements == 1;
    const uint32_t cols = (float_type ? 104 : coopmat_cols(type)) * (form == 1 ? 2 : 1);
    const uint32_t rows = 2 * kF16XWideTile.rows() + 3;
    const uint32_t tokens = form == 2 ? kF16XNarrowTile.tokens() + 7 : 2 * kF16XWideTile.tokens() - 20;
    const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
    vk::Buffer w = device_buffer(m.bytes);
    const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
    vk::Buffer x16(device, x.size() * 2, vk::MemoryKind::DeviceLocal);
    vk::Buffer scratch(device, split_scratch_floats(tokens, rows, 2) * 4, vk::MemoryKind::DeviceLocal);
    expect_matches_reference(m, rows, cols, x, tokens,
                             run_product(w, type, rows, cols, x, tokens,
                                         [&](vk::CommandRecorder& rec, const Kernels& k, MatmulArgs a) {
                                           convert_f16(rec, k, a.x, x16.view(), tokens * cols);
                                           a.x_f16 = x16.view();
                                           ASSERT_TRUE(coopmat_takes_f16_x(device, a));
                                           if (form == 2) {
                                             ASSERT_EQ(f16x_plan(a).tile, &kF16XNarrowTile);
                                             matmul(rec, k, a, MatmulPath::CoopMat);
                                             return;
                                           }
                                           a.x = a.x_f16;
                                           a.split_scratch = scratch.view();
                                           a.k_splits = form == 1 ? 2 : 1;
                                           ASSERT_EQ(coopmat_k_splits(a, kF16XWideTile), form == 1 ? 2u : 1u);
                                           dispatch_matmul_coopmat(rec, k, a, wide, kF16XWideTile);
                                         }),
                             2e-3);
  }
}

// Split-K (MatmulArgs::split_scratch): long rows over few tiles split k among work groups whose partial
// tiles reduce_splits sums in split order. Every split count (an uneven last split included) and the
// automatic choice match the reference, through matmul() on the 32-token tile and through
// dispatch_matmul_coopmat on the large one (matmul() does not split it).
TEST_P(MatmulTest, CoopMatSplitKMatchesReference) {
  if (!coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no cooperative matrices";
  const TensorType type = GetParam();
  const uint32_t cols = coopmat_cols(type) * 7, rows = 2 * kSmallTile.rows() + 5;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const vk::ComputePipeline& large = context().pipelines().get(
      std::string(coopmat_uses_khr(context().device()) ? "matmul_coopmat_khr_" : "matmul_coopmat_") +
          std::string(type_variant(type)),
      CoopmatTile{}.spec());
  for (const uint32_t tokens : {1u, 29u, 70u}) {
    const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
    const CoopmatTile tile = tokens <= kSmallTile.tokens() ? kSmallTile : CoopmatTile{};
    vk::Buffer scratch(context().device(), split_scratch_floats(tokens, rows, 8) * 4,
                       vk::MemoryKind::DeviceLocal);
    for (const uint32_t splits : {0u, 2u, 3u, 8u}) {
      SCOPED_TRACE(std::to_string(tokens) + " tokens, k_splits " + std::to_string(splits));
      const std::vector<float> y = run_product(w, type, rows, cols, x, tokens,
                                               [&](vk::CommandRecorder& rec, const Kernels& k, MatmulArgs a) {
                                                 a.split_scratch = scratch.view();
                                                 a.k_splits = splits;
                                                 EXPECT_GT(coopmat_k_splits(a, tile), 1u);
                                                 if (tokens <= kSmallTile.tokens())
                                                   matmul(rec, k, a, MatmulPath::CoopMat);
                                                 else
                                                   dispatch_matmul_coopmat(rec, k, a, large, tile);
                                               });
      expect_matches_reference(m, rows, cols, x, tokens, y, 2e-3);
    }
  }
}

// VK_NV_cooperative_matrix2's workgroup-scope product (GPU only: lavapipe has no cooperative matrices):
// whole and edge tiles of the default tile and of the tuning harness's other shapes, against the reference.
TEST_P(MatmulTest, CoopMat2MatchesReferenceWhereSupported) {
  const TensorType type = GetParam();
  if (!coopmat2_takes(context().device(), type))
    GTEST_SKIP() << "device " << context().device().info().name
                 << " has no VK_NV_cooperative_matrix2 path for this weight type";
  const uint32_t cols = test_cols(type);
  for (const Cm2Tile tile :
       {Cm2Tile{}, Cm2Tile{128, 64, 64, 64}, Cm2Tile{256, 128, 256, 32}, Cm2Tile{256, 256, 128, 64}}) {
    SCOPED_TRACE("tile " + std::to_string(tile.rows) + "x" + std::to_string(tile.tokens) + " bk " +
                 std::to_string(tile.bk));
    const uint32_t rows = 2 * tile.rows + 3, tokens = tile.tokens + 7;
    const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
    vk::Buffer w = device_buffer(m.bytes);
    const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
    const vk::ComputePipeline& pipeline =
        context().pipelines().get("matmul_cm2_" + std::string(type_variant(type)), tile.spec());
    vk::Buffer x16 = half_buffer(x);
    expect_matches_reference(m, rows, cols, x, tokens,
                             run_product(w, type, rows, cols, x, tokens,
                                         [&](vk::CommandRecorder& rec, const Kernels& k, MatmulArgs a) {
                                           a.x_f16 = x16.view();
                                           dispatch_matmul_cm2(rec, k, a, pipeline, tile);
                                         }),
                             2e-3);
  }
  // Through matmul() with the default tile, x converted on the device (convert_f16).
  const uint32_t rows = 67, tokens = 70;
  const HostMatrix m = random_matrix(type, rows, cols, random_floats(uint64_t{rows} * cols));
  vk::Buffer w = device_buffer(m.bytes);
  const std::vector<float> x = random_floats(uint64_t{tokens} * cols);
  vk::Buffer x16(context().device(), x.size() * 2, vk::MemoryKind::DeviceLocal);
  expect_matches_reference(m, rows, cols, x, tokens,
                           run_product(w, type, rows, cols, x, tokens,
                                       [&](vk::CommandRecorder& rec, const Kernels& k, MatmulArgs a) {
                                         convert_f16(rec, k, a.x, x16.view(), tokens * cols);
                                         a.x_f16 = x16.view();
                                         matmul(rec, k, a, MatmulPath::CoopMat2);
                                       }),
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

// Auto takes matvec for up to 16 tokens, above that cooperative matrices where the device has them and x
// rows are 16-byte aligned (CoopMat2 only on request), else matvec up to 32 tokens and tiles above; an
// explicit CoopMat or CoopMat2 request where it cannot run is an error, not a silent fallback.
TEST_F(MatmulPathTest, AutoResolvesByTokenCountAndAlignment) {
  const vk::Device& device = context().device();
  // The product's shape only (resolution reads no buffer).
  const auto product = [](TensorType type, uint32_t tokens, uint32_t x_stride, uint32_t rows = 4096) {
    MatmulArgs a{{{}, type, rows, 4096}, {}, {}, tokens};
    a.x_stride = x_stride;
    return a;
  };
  const auto resolve = [&](MatmulPath p, uint32_t tokens, uint32_t x_stride) {
    return resolve_matmul_path(device, p, product(TensorType::Q4_0, tokens, x_stride));
  };
  EXPECT_EQ(resolve(MatmulPath::Auto, 1, 4096), MatmulPath::Deterministic);
  EXPECT_EQ(resolve(MatmulPath::Auto, 16, 4096), MatmulPath::Deterministic);
  const bool coopmat = coopmat_supported(device);
  EXPECT_EQ(resolve(MatmulPath::Auto, 17, 4096), coopmat ? MatmulPath::CoopMat : MatmulPath::Deterministic);
  EXPECT_EQ(resolve(MatmulPath::Auto, 32, 4096), coopmat ? MatmulPath::CoopMat : MatmulPath::Deterministic);
  const MatmulPath tiles = coopmat ? MatmulPath::CoopMat : MatmulPath::Tiled;
  EXPECT_EQ(resolve(MatmulPath::Auto, 33, 4096), tiles);
  EXPECT_EQ(resolve(MatmulPath::Auto, 512, 4096), tiles);
  EXPECT_EQ(resolve(MatmulPath::Auto, 512, 4097), MatmulPath::Tiled);
  EXPECT_EQ(resolve(MatmulPath::Deterministic, 512, 4096), MatmulPath::Deterministic);
  if (!coopmat_supported(device)) {
    EXPECT_THROW(resolve(MatmulPath::CoopMat, 512, 4096), Error);
  }
  // CoopMat2: the 16-byte aligned formats only; Auto wants it for large products above 32 tokens, and
  // takes it only when the caller gives x as f16.
  EXPECT_FALSE(coopmat2_takes(device, TensorType::Q4_0));
  const bool cm2 = coopmat2_takes(device, TensorType::Q4_0x8) && coopmat;
  MatmulArgs ffn = product(TensorType::Q4_0x8, 512, 4096, 14336);
  EXPECT_EQ(coopmat2_wanted(device, MatmulPath::Auto, ffn), cm2);
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, ffn), tiles);  // no x_f16
  vk::Buffer half(device, 64, vk::MemoryKind::DeviceLocal);
  ffn.x_f16 = half.view();
  EXPECT_EQ(resolve_matmul_path(device, MatmulPath::Auto, ffn), cm2 ? MatmulPath::CoopMat2 : tiles);
  EXPECT_FALSE(coopmat2_wanted(device, MatmulPath::Auto, product(TensorType::Q4_0x8, 32, 4096, 14336)));
  EXPECT_FALSE(coopmat2_wanted(device, MatmulPath::Auto, product(TensorType::Q4_0x8, 512, 4096, 4096)));
  EXPECT_FALSE(coopmat2_wanted(device, MatmulPath::Deterministic, ffn));
  if (!cm2) {
    EXPECT_THROW(resolve_matmul_path(device, MatmulPath::CoopMat2, ffn), Error);
  }
}

// How the x-as-f16 build runs a product (f16x_plan): the wide tile with kWideTileMinGroups of its tiles or
// more, or half as many split in two where rows are long and the scratch holds two planes; never with more
// than an eighth of its tokens idle; else the default tile, or the narrow one where the default makes fewer
// than kWideTileMinGroups groups. llama3-8b at 512 tokens: Q/K/V and gate/up wide, down wide and split, o
// default; llama3-1b: gate/up wide, Q/K/V default, o and down narrow.
TEST_F(MatmulPathTest, TheWideTileGoesToLargeProductsOfWholeTokenTiles) {
  vk::Buffer scratch(context().device(), split_scratch_floats(512, 4096, 2) * 4, vk::MemoryKind::DeviceLocal);
  const auto plan = [&](uint32_t rows, uint32_t cols, uint32_t tokens, uint32_t k_splits = 0) {
    MatmulArgs a{{{}, TensorType::Q4_0x8, rows, cols}, {}, {}, tokens};
    a.split_scratch = scratch.view();
    a.k_splits = k_splits;
    const F16XPlan p = f16x_plan(a);
    return std::pair{p.tile == &kF16XWideTile     ? "wide"
                     : p.tile == &kF16XNarrowTile ? "narrow"
                                                  : "default",
                     p.k_splits};
  };
  using P = std::pair<const char*, uint32_t>;
  const auto expect = [](std::pair<const char*, uint32_t> got, P want) {
    EXPECT_STREQ(got.first, want.first);
    EXPECT_EQ(got.second, want.second);
  };
  expect(plan(6144, 4096, 512), P{"wide", 1});   // 8B Q/K/V: 48 x 2 tiles
  expect(plan(28672, 4096, 512), P{"wide", 1});  // 8B gate/up
  expect(plan(28672, 4096, 256), P{"wide", 1});
  expect(plan(4096, 14336, 512), P{"wide", 2});        // 8B down: 32 x 2, long rows
  expect(plan(4096, 14336, 512, 1), P{"default", 1});  // splitting turned off
  expect(plan(4096, 4096, 512), P{"wide", 2});         // 8B o: 32 x 2 tiles, rows long enough to split
  expect(plan(4096, 2048, 512), P{"default", 1});      // rows too short to split: 128 default tiles
  expect(plan(3072, 2048, 512), P{"default", 1});      // 1B Q/K/V: 24 x 2 wide tiles, 96 default ones
  expect(plan(2048, 8192, 512), P{"narrow", 1});       // 1B down: 64 default tiles
  expect(plan(2048, 2048, 512), P{"narrow", 1});       // 1B o
  expect(plan(4096, 4096, 100), P{"narrow", 1});       // a short chunk: 32 default tiles
  expect(plan(16384, 2048, 512), P{"wide", 1});        // 1B gate/up
  expect(plan(28672, 4096, 480), P{"wide", 1});        // 32 of 512 tokens idle: a sixteenth
  expect(plan(28672, 4096, 300), P{"default", 1});     // 212 of 512 idle
  expect(plan(28672, 4096, 200), P{"default", 1});     // 56 of 256 idle
  expect(plan(8192, 14336, 512), P{"wide", 1});        // 64 x 2 tiles need no split
  MatmulArgs no_scratch{{{}, TensorType::Q4_0x8, 4096, 14336}, {}, {}, 512};
  EXPECT_EQ(f16x_plan(no_scratch).tile, &kF16XTile) << "no room for two planes";
  EXPECT_LE(kF16XNarrowTile.shared_bytes(), 48u * 1024) << "every tile fits 48 KiB of shared memory";
  EXPECT_LE(kF16XWideTile.shared_bytes(), 48u * 1024);
}

// How many ways coopmat_k_splits splits a product: not at all without scratch or with k_splits 1;
// kAutoSplits ways below kSplitMaxGroups tiles, each split keeping kMinSplitSteps k steps; never more than
// the scratch holds or than there are k steps; and always into whole, non-empty runs of steps.
TEST_F(MatmulPathTest, SplitKCountsFollowTheTilesTheScratchAndTheSteps) {
  vk::Buffer scratch(context().device(), split_scratch_floats(32, 4096, 8) * 4, vk::MemoryKind::DeviceLocal);
  MatmulArgs a{{{}, TensorType::Q4_0x8, 4096, 14336}, {}, {}, 32};
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 1u) << "no scratch";
  a.split_scratch = scratch.view();
  // 64 row tiles of one token tile: kAutoSplits, 56 of the 448 k steps each.
  static_assert(kAutoSplits == 8);
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 8u);
  a.k_splits = 1;
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 1u);
  a.k_splits = 3;  // 448 steps: 150 a split, the last 148
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 3u);
  a.k_splits = 0;
  a.w.rows = 28672;  // 448 row tiles would split, but the scratch holds only one plane of these rows
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 1u);
  a.w.rows = 4096;
  a.w.cols = 256;  // 8 k steps: a split keeps at least kMinSplitSteps of them
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 1u);
  a.k_splits = 20;  // more splits than steps: one step each
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 8u);
  a.k_splits = 5;  // 8 steps asked into 5: 2 a split makes 4 splits, none empty
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 4u);
  // The large tile at 512 tokens (32 x 4 groups): as many splits as fit the scratch, 4 here; and none for
  // a product of kSplitMaxGroups tiles or more (1024 row tiles of the 32-token tile).
  vk::Buffer large(context().device(), split_scratch_floats(512, 4096, 4) * 4, vk::MemoryKind::DeviceLocal);
  a = MatmulArgs{{{}, TensorType::Q4_0x8, 4096, 4096}, {}, {}, 512};
  a.split_scratch = large.view();
  EXPECT_EQ(coopmat_k_splits(a, CoopmatTile{}), 4u);
  a.tokens = 32;
  a.w.rows = 1023 * kSmallTile.rows();
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 4u) << "1023 row tiles, 4 planes of them fit";
  a.w.rows = 1024 * kSmallTile.rows();
  EXPECT_EQ(coopmat_k_splits(a, kSmallTile), 1u) << "1024 row tiles";
}

}  // namespace
}  // namespace kvtrie::kernels
