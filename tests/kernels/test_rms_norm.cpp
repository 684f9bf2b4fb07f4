// rms_norm against a double-precision reference in this file: plain rows, no weight, per-head rows inside
// strided tokens (qwen3 q/k norm). Sizes are primes so rows are not multiples of the work-group size.
// add_rms_norm: x += residual in place, then the norm of the sum, the same bits as add() then rms_norm().
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "kernels/ops/add.h"
#include "kernels/ops/rms_norm.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

// Reference: the same row addressing as RmsNormArgs.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>* w, uint32_t rows,
                             uint32_t n, uint32_t heads, uint32_t x_stride, uint32_t y_stride, float eps,
                             std::vector<float> y) {
  for (uint32_t r = 0; r < rows; ++r) {
    const size_t xb = size_t{r / heads} * x_stride + size_t{r % heads} * n;
    const size_t yb = size_t{r / heads} * y_stride + size_t{r % heads} * n;
    double sum = 0;
    for (uint32_t i = 0; i < n; ++i) sum += double{x[xb + i]} * x[xb + i];
    const double scale = 1.0 / std::sqrt(sum / n + eps);
    for (uint32_t i = 0; i < n; ++i) y[yb + i] = static_cast<float>(x[xb + i] * scale * (w ? (*w)[i] : 1.0f));
  }
  return y;
}

class RmsNorm : public test::VulkanTest {
 protected:
  // Plain rows: `rows` of n values, weighted, contiguous in x and y (the whole views).
  static RmsNormArgs plain_rows(vk::BufferView x, vk::BufferView weight, vk::BufferView y, uint32_t rows,
                                uint32_t n, bool half_out = false) {
    RmsNormArgs a;
    a.x = x;
    a.weight = weight;
    a.y = y;
    a.rows = rows;
    a.n = n;
    a.half_out = half_out;
    return a;
  }
  void check(uint32_t rows, uint32_t n, uint32_t heads, uint32_t x_stride, uint32_t y_stride, bool weight) {
    const uint32_t groups = (rows + heads - 1) / heads;
    const std::vector<float> x = random_floats(size_t{groups} * x_stride, -3.0f, 3.0f);
    const std::vector<float> w = random_floats(n, 0.5f, 1.5f);
    const std::vector<float> y0 = random_floats(size_t{groups} * y_stride);  // untouched gaps must survive
    vk::Buffer bx = device_buffer(x), bw = device_buffer(w), by = device_buffer(y0);
    Kernels k(context(), Prewarm::No);
    vk::CommandRecorder rec(context());
    rec.begin();
    RmsNormArgs a;
    a.x = bx.view(0, x.size() * 4);
    if (weight) a.weight = bw.view(0, w.size() * 4);
    a.y = by.view(0, y0.size() * 4);
    a.rows = rows;
    a.n = n;
    a.eps = 1e-5f;
    a.heads = heads;
    a.x_stride = x_stride;
    a.y_stride = y_stride;
    rms_norm(rec, k, a);
    rec.end();
    rec.submit_and_wait();
    const std::vector<float> got = read_back<float>(by, y0.size());
    const std::vector<float> want =
        reference(x, weight ? &w : nullptr, rows, n, heads, x_stride, y_stride, 1e-5f, y0);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-5f * std::max(1.0f, std::fabs(want[i]))) << "index " << i;
  }
};

TEST_F(RmsNorm, PlainRowsWithWeightMatchReference) {
  check(7, 523, 1, 523, 523, true);
}
TEST_F(RmsNorm, RowsWithoutWeightMatchReference) {
  check(5, 61, 1, 61, 61, false);
}
TEST_F(RmsNorm, LongRowsMatchReference) {
  check(2, 4099, 1, 4099, 4099, true);
}
TEST_F(RmsNorm, PerHeadRowsInsideStridedTokensMatchReference) {
  // 3 tokens x 5 heads of 67, tokens 5*67+13 floats apart in x (a fused QKV row), 5*67+3 in y.
  check(15, 67, 5, 5 * 67 + 13, 5 * 67 + 3, true);
}

TEST_F(RmsNorm, AddThenNormInOneDispatchEqualsAddFollowedByNorm) {
  const uint32_t rows = 3, n = 523;
  const std::vector<float> x = random_floats(size_t{rows} * n, -3.0f, 3.0f);
  const std::vector<float> r = random_floats(size_t{rows} * n, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(n, 0.5f, 1.5f);
  Kernels k(context(), Prewarm::No);
  auto args = [&](const vk::Buffer& bx, const vk::Buffer& bw, const vk::Buffer& by) {
    return plain_rows(bx.view(0, x.size() * 4), bw.view(0, w.size() * 4), by.view(0, x.size() * 4), rows, n);
  };
  vk::Buffer fx = device_buffer(x), fr = device_buffer(r), fw = device_buffer(w), fy = device_buffer(x);
  vk::Buffer sx = device_buffer(x), sr = device_buffer(r), sw = device_buffer(w), sy = device_buffer(x);
  vk::CommandRecorder rec(context());
  rec.begin();
  add_rms_norm(rec, k, args(fx, fw, fy), fr.view(0, r.size() * 4));
  add(rec, k, sx.view(0, x.size() * 4), sr.view(0, r.size() * 4), sx.view(0, x.size() * 4), rows * n);
  rms_norm(rec, k, args(sx, sw, sy));
  rec.end();
  rec.submit_and_wait();
  const std::vector<float> fused_x = read_back<float>(fx, x.size()), split_x = read_back<float>(sx, x.size());
  const std::vector<float> fused_y = read_back<float>(fy, x.size()), split_y = read_back<float>(sy, x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(fused_x[i], x[i] + r[i]) << "x index " << i;
  EXPECT_EQ(fused_x, split_x);
  EXPECT_EQ(fused_y, split_y);
  const std::vector<float> sum = fused_x;
  const std::vector<float> want = reference(sum, &w, rows, n, 1, n, n, 1e-5f, std::vector<float>(x.size()));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(fused_y[i], want[i], 2e-5f * std::max(1.0f, std::fabs(want[i]))) << "index " << i;
}

// The f16 output (a tensor-core product's x), plain and after the residual add: the host's
// round-to-nearest-even of the f32 output, bit for bit; the residual sum in x is the same either way.
TEST_F(RmsNorm, HalfOutputIsTheF16OfTheOutput) {
  const uint32_t rows = 3, n = 524;
  const std::vector<float> x = random_floats(size_t{rows} * n, -3.0f, 3.0f);
  const std::vector<float> r = random_floats(size_t{rows} * n, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(n, 0.5f, 1.5f);
  Kernels k(context(), Prewarm::No);
  vk::Buffer bw = device_buffer(w), br = device_buffer(r);
  for (const bool add_first : {false, true}) {
    SCOPED_TRACE(add_first ? "add_rms_norm" : "rms_norm");
    vk::Buffer fx = device_buffer(x), hx = device_buffer(x);
    vk::Buffer fy(context().device(), x.size() * 4, vk::MemoryKind::DeviceLocal);
    vk::Buffer hy(context().device(), x.size() * 2, vk::MemoryKind::DeviceLocal);
    auto args = [&](const vk::Buffer& bx, const vk::Buffer& by, bool half) {
      return plain_rows(bx.view(0, x.size() * 4), bw.view(0, w.size() * 4), by.view(), rows, n, half);
    };
    vk::CommandRecorder rec(context());
    rec.begin();
    if (add_first) {
      add_rms_norm(rec, k, args(fx, fy, false), br.view(0, r.size() * 4));
      add_rms_norm(rec, k, args(hx, hy, true), br.view(0, r.size() * 4));
    } else {
      rms_norm(rec, k, args(fx, fy, false));
      rms_norm(rec, k, args(hx, hy, true));
    }
    rec.end();
    rec.submit_and_wait();
    const std::vector<float> want = read_back<float>(fy, x.size());
    const std::vector<uint16_t> got = read_back<uint16_t>(hy, x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], fp32_to_fp16(want[i])) << i;
    EXPECT_EQ(read_back<float>(fx, x.size()), read_back<float>(hx, x.size()));
  }
  RmsNormArgs odd;
  odd.x = odd.y = br.view();
  odd.rows = 1;
  odd.n = 523;
  odd.half_out = true;
  vk::CommandRecorder rec(context());
  rec.begin();
  EXPECT_THROW(rms_norm(rec, k, odd), Error);
  rec.end();
}

}  // namespace
}  // namespace kvtrie::kernels
