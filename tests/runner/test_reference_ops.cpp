// The CPU reference ops against values computed by hand. These ops are the oracle for every Vulkan kernel,
// so each expectation here is derived on paper, not by running the code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "runner/model/quantization.h"
#include "runner/reference/reference_ops.h"

namespace kvtrie::reference {
namespace {

constexpr float kTol = 1e-6f;

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = kTol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
}

TEST(ReferenceOps, RmsNormScalesByInverseRootMeanSquareAndWeight) {
  // mean(x^2) = (1 + 4 + 9 + 16) / 4 = 7.5
  std::vector<float> x{1, 2, 3, 4}, w{1, 1, 2, 0.5f}, out(4);
  rms_norm(x, w, 0.0f, out);
  const float r = 1.0f / std::sqrt(7.5f);
  expect_near(out, {1 * r, 2 * r, 6 * r, 2 * r});
}

TEST(ReferenceOps, RmsNormAddsEpsilonInsideTheRoot) {
  // mean(x^2) = 1, + eps 3 = 4, root 2: out = x * w / 2.
  std::vector<float> x{1, -1, 1, -1}, w{2, 4, 6, 8}, out(4);
  rms_norm(x, w, 3.0f, out);
  expect_near(out, {1, -2, 3, -4});
}

TEST(ReferenceOps, RmsNormHeadsNormalizesEachHeadSeparately) {
  // Head 0: [3, 4] mean sq 12.5; head 1: [1, 1] mean sq 1. Weight [1, 2] shared.
  std::vector<float> x{3, 4, 1, 1}, w{1, 2};
  rms_norm_heads(x, w, 2, 0.0f);
  const float r = 1.0f / std::sqrt(12.5f);
  expect_near(x, {3 * r, 8 * r, 1, 2});
}

TEST(ReferenceOps, RopeNormalRotatesAdjacentPairs) {
  // rope_dims 4, base 10000: pair 0 turns by pos rad, pair 1 by pos * 10000^(-1/2) = pos / 100 rad.
  std::vector<float> head{1, 0, 2, 3};
  rope(head, 1, 4, 10000.0f, RopeType::Normal);
  const float c = std::cos(0.01f), s = std::sin(0.01f);
  expect_near(head, {std::cos(1.0f), std::sin(1.0f), 2 * c - 3 * s, 2 * s + 3 * c});
}

TEST(ReferenceOps, RopeNeoxRotatesHalves) {
  // Pairs are (0, 2) and (1, 3).
  std::vector<float> head{1, 2, 0, 3};
  rope(head, 3, 4, 100.0f, RopeType::Neox);  // angles 3 and 3 * 100^(-1/2) = 0.3
  const float c = std::cos(0.3f), s = std::sin(0.3f);
  expect_near(head, {std::cos(3.0f), 2 * c - 3 * s, std::sin(3.0f), 2 * s + 3 * c});
}

TEST(ReferenceOps, RopeAtPositionZeroIsIdentity) {
  for (RopeType type : {RopeType::Normal, RopeType::Neox}) {
    std::vector<float> head{0.5f, -1, 2, 7, 3, -4};
    rope(head, 0, 6, 10000.0f, type);
    expect_near(head, {0.5f, -1, 2, 7, 3, -4});
  }
}

TEST(ReferenceOps, RopeLeavesDimensionsBeyondRopeDimsAlone) {
  std::vector<float> normal{1, 0, 5, 6}, neox{1, 0, 5, 6};
  rope(normal, 2, 2, 10000.0f, RopeType::Normal);
  rope(neox, 2, 2, 10000.0f, RopeType::Neox);  // with 2 rope dims both types rotate (0, 1)
  expect_near(normal, {std::cos(2.0f), std::sin(2.0f), 5, 6});
  expect_near(neox, {std::cos(2.0f), std::sin(2.0f), 5, 6});
}

TEST(ReferenceOps, RopeFrequencyFactorsDivideEachPairsAngle) {
  std::vector<float> head{1, 0, 1, 0};
  const std::vector<float> factors{2, 4};
  rope(head, 1, 4, 10000.0f, RopeType::Normal, factors);  // angles 1/2 and 0.01/4
  expect_near(head, {std::cos(0.5f), std::sin(0.5f), std::cos(0.0025f), std::sin(0.0025f)});
  EXPECT_DOUBLE_EQ(rope_angle(8, 1, 4, 10000.0f, factors), 8 * 0.01 / 4);
}

TEST(ReferenceOps, RopeScoresDependOnlyOnRelativePosition) {
  // The defining property: <rope(q, m), rope(k, n)> is a function of m - n.
  for (RopeType type : {RopeType::Normal, RopeType::Neox}) {
    auto score = [&](uint32_t m, uint32_t n) {
      std::vector<float> q{0.3f, -1.2f, 0.7f, 2.0f, -0.4f, 0.9f}, k{1.1f, 0.2f, -0.6f, 0.5f, 1.5f, -0.8f};
      rope(q, m, 6, 500.0f, type);
      rope(k, n, 6, 500.0f, type);
      double dot = 0;
      for (size_t i = 0; i < q.size(); ++i) dot += static_cast<double>(q[i]) * k[i];
      return dot;
    };
    EXPECT_NEAR(score(7, 3), score(4, 0), 1e-5);
    EXPECT_NEAR(score(20, 11), score(9, 0), 1e-5);
    EXPECT_GT(std::abs(score(7, 3) - score(3, 3)), 1e-3);  // and it does depend on it
  }
}

TEST(ReferenceOps, RopeHeadsRotatesEveryHead) {
  std::vector<float> x{1, 0, 1, 0};  // two heads of 2 dims
  rope_heads(x, 2, 1, 2, 10000.0f, RopeType::Normal);
  expect_near(x, {std::cos(1.0f), std::sin(1.0f), std::cos(1.0f), std::sin(1.0f)});
}

TEST(ReferenceOps, MatvecMultipliesRowMajorRows) {
  const std::vector<float> w{1, 2, 3, 4, 5, 6};  // 2 rows of 3
  std::vector<float> y(2);
  matvec(w, std::vector<float>{1, 0, -1}, y);
  expect_near(y, {-2, -2});
  matvec(w, std::vector<float>{1, 1, 1}, y);
  expect_near(y, {6, 15});
  EXPECT_THROW(matvec(w, std::vector<float>{1, 1}, y), Error);
}

TEST(ReferenceOps, QuantizedMatvecDequantizesEachRow) {
  // Q8_0 stores integers in [-127, 127] exactly when a block's largest magnitude is 127 (scale 1).
  std::vector<float> w(64, 1.0f);
  w[0] = 127;
  for (size_t i = 32; i < 64; ++i) w[i] = 2;
  w[32 + 5] = -127;
  std::vector<uint8_t> bytes(2 * row_bytes(TensorType::Q8_0, 32));
  quantize_row(TensorType::Q8_0, w.data(), bytes.data(), 32);
  quantize_row(TensorType::Q8_0, w.data() + 32, bytes.data() + bytes.size() / 2, 32);
  std::vector<float> y(2);
  matvec(TensorType::Q8_0, bytes, std::vector<float>(32, 1.0f), y);
  expect_near(y, {127 + 31, -127 + 2 * 31}, 0.0f);
}

TEST(ReferenceOps, MatmulIsOneMatvecPerToken) {
  const std::vector<float> w{1, 2, 3, 4, 5, 6};  // 2 rows of 3
  std::vector<float> y(4);
  matmul(w, std::vector<float>{1, 0, -1, 1, 1, 1}, 2, y);
  expect_near(y, {-2, -2, 6, 15});
}

TEST(ReferenceOps, AddIsElementwise) {
  std::vector<float> a{1, 2, 3};
  add(a, std::vector<float>{0.5f, -2, 10});
  expect_near(a, {1.5f, 0, 13});
}

TEST(ReferenceOps, SwigluIsSiluOfGateTimesUp) {
  // sigmoid(ln 3) = 3/4, so silu(ln 3) = 0.75 ln 3; silu(0) = 0; silu(-ln 3) = -0.25 ln 3.
  const float ln3 = std::log(3.0f);
  std::vector<float> out(3);
  swiglu(std::vector<float>{0, ln3, -ln3}, std::vector<float>{5, 2, 4}, out);
  expect_near(out, {0, 1.5f * ln3, -ln3});
}

TEST(ReferenceOps, SoftmaxNormalizesExponentials) {
  std::vector<float> x{0, std::log(2.0f), std::log(3.0f)};
  softmax(x);
  expect_near(x, {1.0f / 6, 2.0f / 6, 3.0f / 6});
}

TEST(ReferenceOps, SoftmaxIsStableForLargeValues) {
  // exp(1000) overflows float and double alike; subtracting the maximum first gives 1, 1, 1/e.
  std::vector<float> x{1000, 1000, 999};
  softmax(x);
  const float sum = 2.0f + std::exp(-1.0f);
  expect_near(x, {1 / sum, 1 / sum, std::exp(-1.0f) / sum});
}

TEST(ReferenceOps, AttentionOverTwoPositions) {
  // One head, dim 2, scale 1/sqrt(2): scores 0 and ln 3 -> weights 1/4, 3/4.
  const float r2 = std::sqrt(2.0f);
  const std::vector<float> q{1, 0}, keys{0, 0, std::log(3.0f) * r2, 0}, values{4, 8, 0, 4};
  std::vector<float> out(2);
  attention(q, keys, values, 2, {1, 1, 2, 2}, out);
  expect_near(out, {1, 5}, 1e-5f);
}

TEST(ReferenceOps, AttentionOverThreePositions) {
  // Scores 0, ln 2, ln 3 -> weights 1/6, 2/6, 3/6.
  const float r2 = std::sqrt(2.0f);
  const std::vector<float> q{1, 1};
  const std::vector<float> keys{0, 0, std::log(2.0f) * r2, 0, 0, std::log(3.0f) * r2};
  const std::vector<float> values{6, 0, 0, 6, 6, 6};
  std::vector<float> out(2);
  attention(q, keys, values, 3, {1, 1, 2, 2}, out);
  expect_near(out, {4, 5}, 1e-5f);
}

TEST(ReferenceOps, AttentionSeesOnlyTheFirstNPositions) {
  // Causal masking is the caller passing n_pos: position 1 must not leak into a one-position attention.
  const std::vector<float> q{1, 0}, keys{0, 0, 5, 0}, values{4, 8, 100, 100};
  std::vector<float> out(2);
  attention(q, keys, values, 1, {1, 1, 2, 2}, out);
  expect_near(out, {4, 8});
}

TEST(ReferenceOps, CausalAttentionLetsEachTokenSeeOnlyItsPast) {
  // Tokens at positions 0 and 1, same query: token 0 sees only v0; token 1 weighs v0, v1 by 1/4, 3/4.
  const float r2 = std::sqrt(2.0f);
  const std::vector<float> q{1, 0, 1, 0}, keys{0, 0, std::log(3.0f) * r2, 0}, values{4, 8, 0, 4};
  std::vector<float> out(4);
  attention_causal(q, keys, values, 0, 2, {1, 1, 2, 2}, out);
  expect_near(out, {4, 8, 1, 5}, 1e-5f);
  // The same second token as a batch of one starting at position 1.
  std::vector<float> one(2);
  attention_causal(std::span<const float>(q).subspan(2), keys, values, 1, 1, {1, 1, 2, 2}, one);
  expect_near(one, {1, 5}, 1e-5f);
}

TEST(ReferenceOps, AttentionExplicitScaleReplacesDefault) {
  // Scale 1: scores 0 and ln 3 directly.
  const std::vector<float> q{std::log(3.0f)}, keys{0, 1}, values{4, 0};
  std::vector<float> out(1);
  attention(q, keys, values, 2, {1, 1, 1, 1}, out, 1.0f);
  expect_near(out, {1}, 1e-5f);
}

TEST(ReferenceOps, GqaMapsConsecutiveQueryHeadsToOneKvHead) {
  EXPECT_EQ(kv_head_for(0, 8, 2), 0u);
  EXPECT_EQ(kv_head_for(3, 8, 2), 0u);
  EXPECT_EQ(kv_head_for(4, 8, 2), 1u);
  EXPECT_EQ(kv_head_for(7, 8, 2), 1u);
  EXPECT_EQ(kv_head_for(5, 8, 8), 5u);
  EXPECT_EQ(kv_head_for(5, 8, 1), 0u);
  EXPECT_THROW(kv_head_for(0, 6, 4), Error);
}

TEST(ReferenceOps, AttentionWithGqaReadsTheMappedKvHead) {
  // 4 query heads, 2 KV heads, K dim 1, V dim 2 (unequal on purpose). Position 0 has keys 0 for both KV
  // heads; position 1 has key ln 3 for KV head 0 and 0 for KV head 1. Query 1 everywhere, scale 1.
  // KV head 0: weights 1/4, 3/4; KV head 1: weights 1/2, 1/2.
  const std::vector<float> q{1, 1, 1, 1};
  const std::vector<float> keys{0, 0, std::log(3.0f), 0};
  const std::vector<float> values{/*pos 0*/ 4, 0, 10, 20, /*pos 1*/ 0, 8, 30, 40};
  std::vector<float> out(8);
  attention(q, keys, values, 2, {4, 2, 1, 2}, out, 1.0f);
  expect_near(out, {1, 6, 1, 6, 20, 30, 20, 30}, 1e-5f);
}

TEST(ReferenceOps, ArgmaxPrefersTheLowestIndexOnTies) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-1, -5, -1}), 0);
  EXPECT_EQ(argmax(std::vector<float>{0, 0, 0, 9}), 3);
}

TEST(ReferenceOps, DequantizeTensorReadsRowsOfAnyType) {
  // An F16 tensor of 2 rows x 3 values whose halves are exact.
  const std::vector<float> want{1, -2, 0.5f, 3, 0.25f, -8};
  std::vector<uint8_t> bytes(want.size() * 2);
  for (size_t i = 0; i < want.size(); ++i) {
    const uint16_t h = fp32_to_fp16(want[i]);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  GgufTensor t{"t", {3, 2}, TensorType::F16, 0, bytes};
  expect_near(dequantize_tensor(t), want, 0.0f);
  expect_near(dequantize_tensor_row(t, 1), {3, 0.25f, -8}, 0.0f);
  EXPECT_THROW(dequantize_tensor_row(t, 2), Error);
}

}  // namespace
}  // namespace kvtrie::reference
