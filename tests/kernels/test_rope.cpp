// rope against a double-precision reference in this file: normal and neox pairing, partial rope_dims,
// per-token positions (tokens of several sequences in one batch), llama3 frequency factors, strided tokens.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops/rope.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

void reference(std::vector<float>& x, const std::vector<int32_t>& pos, const std::vector<float>* factors,
               const RopeArgs& a) {
  const uint32_t half = a.rope_dims / 2;
  for (uint32_t t = 0; t < a.n_tokens; ++t)
    for (uint32_t h = 0; h < a.n_heads; ++h)
      for (uint32_t i = 0; i < half; ++i) {
        double freq = std::pow(double{a.freq_base}, -2.0 * i / a.rope_dims);
        if (factors) freq /= (*factors)[i];
        const double theta = pos[t] * freq;
        const size_t base = size_t{t} * a.token_stride + size_t{h} * a.head_dim;
        const size_t p = base + (a.mode == RopeMode::Neox ? i : 2 * i);
        const size_t q = p + (a.mode == RopeMode::Neox ? half : 1);
        const double x0 = x[p], x1 = x[q];
        x[p] = static_cast<float>(x0 * std::cos(theta) - x1 * std::sin(theta));
        x[q] = static_cast<float>(x0 * std::sin(theta) + x1 * std::cos(theta));
      }
}

class Rope : public test::VulkanTest {
 protected:
  void check(RopeMode mode, uint32_t n_tokens, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dims,
             uint32_t token_stride, bool with_factors, int32_t max_pos) {
    RopeArgs a;
    a.n_tokens = n_tokens;
    a.n_heads = n_heads;
    a.head_dim = head_dim;
    a.rope_dims = rope_dims;
    a.token_stride = token_stride;
    a.freq_base = 500000.0f;
    a.mode = mode;
    std::vector<float> x = random_floats(size_t{n_tokens} * token_stride, -2.0f, 2.0f);
    std::vector<int32_t> pos(n_tokens);
    std::uniform_int_distribution<int32_t> dist(0, max_pos);
    for (int32_t& p : pos) p = dist(rng());
    pos[0] = max_pos;
    const std::vector<float> factors = random_floats(rope_dims / 2, 1.0f, 8.0f);
    vk::Buffer bx = device_buffer(x), bp = device_buffer(pos), bf = device_buffer(factors);
    a.x = bx.view(0, x.size() * 4);
    a.positions = bp.view(0, pos.size() * 4);
    if (with_factors) a.freq_factors = bf.view(0, factors.size() * 4);
    Kernels k(context(), Prewarm::No);
    vk::CommandRecorder rec(context());
    rec.begin();
    rope(rec, k, a);
    rec.end();
    rec.submit_and_wait();
    const std::vector<float> got = read_back<float>(bx, x.size());
    reference(x, pos, with_factors ? &factors : nullptr, a);
    // float32 angles: |theta| up to max_pos, so the error grows with position (~1 ulp of theta).
    const float tol = 2e-6f * static_cast<float>(max_pos) + 1e-5f;
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], x[i], tol) << "index " << i;
  }
};

TEST_F(Rope, NormalPairsMatchReference) {
  check(RopeMode::Normal, 7, 3, 64, 64, 3 * 64, false, 100);
}
TEST_F(Rope, NeoxHalvesMatchReference) {
  check(RopeMode::Neox, 5, 7, 32, 32, 7 * 32, false, 300);
}
TEST_F(Rope, PartialRopeDimsLeaveTheRestUntouched) {
  check(RopeMode::Normal, 3, 2, 38, 22, 2 * 38, false, 50);
  check(RopeMode::Neox, 3, 2, 38, 22, 2 * 38, false, 50);
}
TEST_F(Rope, FrequencyFactorsAndStridedTokensMatchReference) {
  check(RopeMode::Normal, 11, 5, 16, 16, 5 * 16 + 9, true, 1000);
}

}  // namespace
}  // namespace kvtrie::kernels
