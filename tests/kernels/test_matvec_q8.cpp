// matvec_q8 against a plain C++ reference for every weight type it takes and every fold (norm, residual
// accumulate, SwiGLU), on random inputs with row counts that do not fill a work group, row lengths that
// give one, several and fractional units per thread, and token counts around the batch size; plus the
// batch-invariance contract (a token alone and in a batch give bit-identical results) and the quantized
// outputs of the SwiGLU product and of the residual add normed for the next product. x is quantized by
// quantize_q8 first, as the engine runs the products.
//
// Weights are uploaded in their file layout and converted on the device (repack_to_device_format), as the
// engine does. Two references:
//   quantized: x rounded to bytes per 16 values exactly as the shader does (scale max|x| / 127, ties to
//     even), times the exactly dequantized weights, in double. Left: f32 rounding (1e-5 of sum |w x|), and
//     values within 1e-3 of a rounding tie, which f32 arithmetic may round the other way (|w| * d each).
//   float: x unrounded. The difference is bounded by the rounding of x: sum |w| * d / 2 over the row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ops/kv_write.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/weight_format.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/staging.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

enum class Fold { Store, Norm, Accumulate, NormSwiglu };
const char* fold_name(Fold f) {
  return f == Fold::Store        ? "store"
         : f == Fold::Norm       ? "norm"
         : f == Fold::Accumulate ? "acc"
                                 : "norm_swiglu";
}
constexpr Fold kFolds[] = {Fold::Store, Fold::Norm, Fold::Accumulate, Fold::NormSwiglu};
constexpr float kEps = 1e-5f;

struct HostMatrix {
  std::vector<uint8_t> bytes;  // file rows
  std::vector<float> values;   // dequantized
};

HostMatrix random_matrix(TensorType type, uint32_t rows, uint32_t cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const uint64_t rb = row_bytes(type, cols);
  HostMatrix m{std::vector<uint8_t>(rb * rows), std::vector<float>(uint64_t{rows} * cols)};
  std::vector<float> src(cols);
  for (uint32_t r = 0; r < rows; ++r) {
    for (float& v : src) v = dist(rng);
    quantize_row(type, src.data(), m.bytes.data() + r * rb, cols);
    dequantize_row(type, m.bytes.data() + r * rb, m.values.data() + uint64_t{r} * cols, cols);
  }
  return m;
}

// x as the shader rounds it: per 16 values, q = round_even(x * 127 / max|x|), value d * q.
struct RoundedX {
  std::vector<double> value, d;  // per element: the rounded value and its group's scale
  std::vector<bool> near_tie;    // x * 127 / max|x| within 1e-3 of a half-integer
};
RoundedX round_like_shader(const std::vector<float>& x) {
  RoundedX r{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<bool>(x.size())};
  for (size_t g = 0; g < x.size(); g += 16) {
    float amax = 0;
    for (size_t i = g; i < g + 16; ++i) amax = std::max(amax, std::abs(x[i]));
    const float id = amax > 0 ? 127.0f / amax : 0.0f, d = amax / 127.0f;
    for (size_t i = g; i < g + 16; ++i) {
      r.value[i] = double{d} * std::nearbyint(x[i] * id);
      r.d[i] = d;
      const double scaled = double{x[i]} * id;
      r.near_tie[i] = std::abs(std::abs(scaled - std::floor(scaled)) - 0.5) < 1e-3;
    }
  }
  return r;
}

// One output of the reference product of row `row` with token vector x (already normed where the fold
// says): the quantized and float sums, and the tolerances that go with them.
struct RefDot {
  double quantized, exact, quant_tol, float_tol;
};
RefDot ref_dot(const HostMatrix& w, uint32_t cols, uint32_t row, const std::vector<float>& x) {
  const RoundedX xr = round_like_shader(x);
  RefDot r{};
  double abs_sum = 0, tie = 0;
  for (uint32_t k = 0; k < cols; ++k) {
    const double wk = w.values[uint64_t{row} * cols + k];
    r.quantized += wk * xr.value[k];
    r.exact += wk * x[k];
    abs_sum += std::abs(wk * x[k]);
    r.float_tol += std::abs(wk) * xr.d[k] * 0.5;
    if (xr.near_tie[k]) tie += std::abs(wk) * xr.d[k];
  }
  r.quant_tol = 1e-5 * abs_sum + tie * 1.01 + 1e-7;
  r.float_tol = r.float_tol * 1.01 + 1e-5 * abs_sum + 1e-7;
  return r;
}

class MatvecQ8Test : public test::VulkanTest, public ::testing::WithParamInterface<TensorType> {
 protected:
  // Uploads file rows and converts them to the device format, as the engine's load does.
  vk::Buffer device_weights(const HostMatrix& m, TensorType file_type, uint32_t rows, uint32_t cols) {
    vk::Buffer w = device_buffer(m.bytes);
    Kernels k(context(), Prewarm::No);
    vk::CommandRecorder rec(context());
    rec.begin();
    repack_to_device_format(rec, k, w.view(0, m.bytes.size()), file_type, rows, cols);
    rec.end();
    rec.submit_and_wait();
    return w;
  }

  // Quantizes `tokens` rows of `cols` values of xb (times norm with a norm) with quantize_q8 into q.
  void quantize(vk::CommandRecorder& rec, const Kernels& k, const vk::Buffer& xb, uint32_t tokens,
                uint32_t cols, vk::BufferView norm, const QuantizedX& q) {
    QuantizeQ8Args a;
    a.x = xb.view();
    a.tokens = tokens;
    a.cols = cols;
    a.norm_weight = norm;
    a.out = q;
    quantize_q8(rec, k, a);
  }

  // Runs matvec_q8 with `fold` for `tokens` vectors, x quantized first by quantize_q8 (as the engine runs
  // it); y starts as y0 (read by Accumulate). With `quantized_out` the product also writes its output
  // quantized (NormSwiglu), or normed by a random next norm's weight (Accumulate), which must equal
  // quantize_q8 (with that norm) of the y it wrote, bit for bit, sums of squares included.
  std::vector<float> run(const vk::Buffer& w, TensorType format, uint32_t w_rows, uint32_t cols, Fold fold,
                         const std::vector<float>& x, const std::vector<float>& norm,
                         const std::vector<float>& y0, uint32_t tokens, bool quantized_out = false) {
    Kernels k(context(), Prewarm::No);
    vk::Buffer xb = device_buffer(x), nb = device_buffer(norm), yb = device_buffer(y0);
    const vk::Device& dev = context().device();
    const uint32_t out_rows = fold == Fold::NormSwiglu ? w_rows / 2 : w_rows;
    const bool norm_fold = fold == Fold::Norm || fold == Fold::NormSwiglu;
    const bool normed_out = quantized_out && fold == Fold::Accumulate;
    const QuantizedBuffers in(dev, tokens, cols, true), out(dev, tokens, out_rows, normed_out),
        requantized(dev, tokens, out_rows, normed_out);
    const vk::Buffer out_norm = device_buffer(random_floats(out_rows, 0.5f, 1.5f));
    const vk::BufferView out_norm_view =
        normed_out ? out_norm.view(0, uint64_t{out_rows} * 4) : vk::BufferView{};
    vk::CommandRecorder rec(context());
    rec.begin();
    quantize(rec, k, xb, tokens, cols, norm_fold ? nb.view(0, uint64_t{cols} * 4) : vk::BufferView{},
             in.view());
    MatvecQ8Args a;
    a.product = {{w.view(0, row_bytes(format, cols) * w_rows), format, w_rows, cols}, {}, yb.view(), tokens};
    a.x = in.view();
    a.norm = norm_fold;
    a.norm_eps = kEps;
    a.accumulate = fold == Fold::Accumulate;
    a.swiglu = fold == Fold::NormSwiglu;
    if (quantized_out) a.quantized_out = out.view();
    a.out_norm = out_norm_view;
    matvec_q8(rec, k, a);
    if (quantized_out) quantize(rec, k, yb, tokens, out_rows, out_norm_view, requantized.view());
    rec.end();
    rec.submit_and_wait();
    if (quantized_out) {
      const uint64_t groups = uint64_t{tokens} * out_rows / 16;
      EXPECT_EQ(read_back<uint8_t>(out.bytes, groups * 16),
                read_back<uint8_t>(requantized.bytes, groups * 16))
          << "quantized output bytes differ from quantize_q8 of the output";
      EXPECT_EQ(read_back<uint32_t>(out.scales, groups * 2),
                read_back<uint32_t>(requantized.scales, groups * 2))
          << "quantized output scales differ from quantize_q8 of the output";
      if (normed_out) {
        EXPECT_EQ(read_back<uint32_t>(out.sum_squares, groups),
                  read_back<uint32_t>(requantized.sum_squares, groups))
            << "sums of squares differ from quantize_q8's";
      }
    }
    return read_back<float>(yb, y0.size());
  }

  // Checks one fold for `tokens` tokens against both references.
  void check(TensorType type, uint32_t out_rows, uint32_t cols, Fold fold, uint32_t tokens,
             bool quantized_out = false) {
    SCOPED_TRACE(std::string(fold_name(fold)) + (quantized_out ? " quantized out" : "") + " rows " +
                 std::to_string(out_rows) + " cols " + std::to_string(cols) + " tokens " +
                 std::to_string(tokens));
    const TensorType format = device_format(type, cols);
    const uint32_t w_rows = fold == Fold::NormSwiglu ? 2 * out_rows : out_rows;
    const HostMatrix m = random_matrix(type, w_rows, cols, rng());
    const vk::Buffer w = device_weights(m, type, w_rows, cols);
    std::vector<float> x = random_floats(uint64_t{tokens} * cols, -2.0f, 2.0f);
    const std::vector<float> norm = random_floats(cols, 0.5f, 1.5f);
    const std::vector<float> y0 = random_floats(uint64_t{tokens} * out_rows);
    const std::vector<float> y = run(w, format, w_rows, cols, fold, x, norm, y0, tokens, quantized_out);
    int bad = 0;
    for (uint32_t t = 0; t < tokens && bad < 5; ++t) {
      std::vector<float> xt(x.begin() + uint64_t{t} * cols, x.begin() + uint64_t{t + 1} * cols);
      double inv_rms = 1;
      if (fold == Fold::Norm || fold == Fold::NormSwiglu) {
        double ss = 0;
        for (float v : xt) ss += double{v} * v;
        inv_rms = 1 / std::sqrt(ss / cols + kEps);
        for (uint32_t i = 0; i < cols; ++i)
          xt[i] *= norm[i];  // the shader rounds x * weight; rms comes after
      }
      for (uint32_t r = 0; r < out_rows && bad < 5; ++r) {
        const RefDot a = ref_dot(m, cols, r, xt);
        double want = a.quantized * inv_rms, want_f = a.exact * inv_rms;
        double tol = a.quant_tol * inv_rms, tol_f = a.float_tol * inv_rms;
        if (fold == Fold::NormSwiglu) {
          const RefDot u = ref_dot(m, cols, out_rows + r, xt);
          const double g = want, up = u.quantized * inv_rms, silu = g / (1 + std::exp(-g));
          const double gf = want_f, upf = u.exact * inv_rms;
          want = silu * up;
          want_f = gf / (1 + std::exp(-gf)) * upf;
          tol = 1.1 * std::abs(up) * tol + std::abs(silu) * u.quant_tol * inv_rms + 1e-6;
          tol_f =
              1.1 * (std::abs(upf) + tol_f) * tol_f + (std::abs(silu) + tol_f) * u.float_tol * inv_rms + 1e-6;
        }
        if (fold == Fold::Accumulate) {
          want += y0[uint64_t{t} * out_rows + r];
          want_f += y0[uint64_t{t} * out_rows + r];
        }
        const float got = y[uint64_t{t} * out_rows + r];
        if (!(std::abs(got - want) <= tol) || !(std::abs(got - want_f) <= tol_f)) {
          ADD_FAILURE() << "y[" << t << "][" << r << "] = " << got << ", quantized reference " << want
                        << " (tol " << tol << "), float reference " << want_f << " (tol " << tol_f << ")";
          ++bad;
        }
      }
    }
  }
};

class MatvecQ8ShapeTest : public test::VulkanTest {};

// Row lengths: one unit per thread or fewer (several row lanes per work group), and many units per thread
// with a remainder. Q6_K's device format takes rows of whole 2048-value groups.
std::vector<uint32_t> test_cols(TensorType type) {
  if (type == TensorType::Q6_K) return {2048, 6144};
  return {256, 512, 9 * 256};
}

TEST_P(MatvecQ8Test, EveryFoldMatchesReference) {
  const TensorType type = GetParam();
  for (uint32_t cols : test_cols(type))
    for (Fold fold : kFolds)
      for (uint32_t tokens : {1u, 3u, 8u, 11u})
        check(type, fold == Fold::NormSwiglu ? 19 : 37, cols, fold, tokens, false);
}

// The SwiGLU product writes its output quantized for the down projection: each work group's 16 outputs a
// token, equal to quantize_q8 of the floats it stored (checked in run()), alone and in batches.
TEST_P(MatvecQ8Test, SwigluQuantizedOutputEqualsQuantizingTheOutput) {
  const TensorType type = GetParam();
  for (uint32_t tokens : {1u, 11u}) check(type, 48, test_cols(type).back(), Fold::NormSwiglu, tokens, true);
}

// A residual product writes the new residual stream quantized and normed for the next normed product (the
// decode step's o and down projections): equal to quantize_q8 of it with the next norm, bit for bit, alone
// and in batches, with y itself still matching the references.
TEST_P(MatvecQ8Test, ResidualQuantizedOutputEqualsQuantizingTheNormedOutput) {
  const TensorType type = GetParam();
  for (uint32_t tokens : {1u, 11u}) check(type, 48, test_cols(type).back(), Fold::Accumulate, tokens, true);
}

// Every fold, and the folds with a quantized output (whose one-token builds differ most from the batched
// ones: 16 lanes of one row against 4 lanes of 4 rows, or 8 of 2 for the residual product), whole groups of
// 16 rows for those.
TEST_P(MatvecQ8Test, TokenAloneAndInBatchAreBitIdentical) {
  const TensorType type = GetParam();
  const uint32_t cols = test_cols(type).back(), tokens = 11;
  struct Case {
    Fold fold;
    bool quantized_out;
  };
  const Case cases[] = {{Fold::Store, false},      {Fold::Norm, false},      {Fold::Accumulate, false},
                        {Fold::NormSwiglu, false}, {Fold::Accumulate, true}, {Fold::NormSwiglu, true}};
  for (const auto [fold, qout] : cases) {
    SCOPED_TRACE(std::string(fold_name(fold)) + (qout ? " quantized out" : ""));
    const uint32_t rows = qout ? 32 : 23;
    const TensorType format = device_format(type, cols);
    const uint32_t w_rows = fold == Fold::NormSwiglu ? 2 * rows : rows;
    const HostMatrix m = random_matrix(type, w_rows, cols, rng());
    const vk::Buffer w = device_weights(m, type, w_rows, cols);
    const std::vector<float> x = random_floats(uint64_t{tokens} * cols, -2.0f, 2.0f);
    const std::vector<float> norm = random_floats(cols, 0.5f, 1.5f);
    const std::vector<float> y0 = random_floats(uint64_t{tokens} * rows);
    const std::vector<float> batch = run(w, format, w_rows, cols, fold, x, norm, y0, tokens, qout);
    // Token 5 sits in the first group of 8 at slot 5, token 9 in the second group at slot 1.
    for (uint32_t t : {0u, 5u, 9u}) {
      const std::vector<float> xt(x.begin() + uint64_t{t} * cols, x.begin() + uint64_t{t + 1} * cols);
      const std::vector<float> y0t(y0.begin() + uint64_t{t} * rows, y0.begin() + uint64_t{t + 1} * rows);
      const std::vector<float> alone = run(w, format, w_rows, cols, fold, xt, norm, y0t, 1, qout);
      EXPECT_EQ(std::memcmp(alone.data(), batch.data() + uint64_t{t} * rows, rows * sizeof(float)), 0)
          << "token " << t << " differs alone vs in a batch of " << tokens;
    }
    // A batch of 3 runs the 4-token builds: its tokens match the batch of 11's bit for bit.
    const std::vector<float> small = run(w, format, w_rows, cols, fold, x, norm, y0, 3, qout);
    EXPECT_EQ(std::memcmp(small.data(), batch.data(), uint64_t{3} * rows * sizeof(float)), 0)
        << "a batch of 3 differs from the first 3 tokens of a batch of " << tokens;
  }
}

// The joined Q/K/V product with qkv_pages: Q rotated in y, K rotated and V stored as f16 in the pages (a
// pool bound as two chunks, a skipped token), against the product followed by kv_write_rope with Q's rope,
// alone and in batches. Unrotated values must match exactly; rotated ones within what FMA contraction of
// the rotation allows (one f16 unit in the last place, as in test_kv_write.cpp; 1e-6 relative in f32).
TEST_P(MatvecQ8Test, QkvProductRotatesQAndStoresKvAsKvWriteRopeDoes) {
  const TensorType type = GetParam();
  const uint32_t cols = test_cols(type).back(), head_dim = 16, q_heads = 4, kv_heads = 2, rope_dims = 12;
  const KvLayout layout{2, 4, kv_heads * head_dim};
  const uint32_t q_rows = q_heads * head_dim, rows = q_rows + 2 * layout.kv_dim, pages_per_chunk = 3;
  const TensorType format = device_format(type, cols);
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  const vk::Buffer w = device_weights(m, type, rows, cols);
  const std::vector<float> norm = random_floats(cols, 0.5f, 1.5f);
  const std::vector<float> factors = random_floats(rope_dims / 2, 1.0f, 8.0f);
  const std::vector<uint16_t> pool_init = [&] {
    std::vector<uint16_t> p(layout.page_elements() * 2 * pages_per_chunk);
    for (uint16_t& h : p) h = fp32_to_fp16(random_floats(1)[0]);
    return p;
  }();
  const vk::Device& dev = context().device();
  for (uint32_t tokens : {1u, 11u}) {
    SCOPED_TRACE("tokens " + std::to_string(tokens));
    const std::vector<float> x = random_floats(uint64_t{tokens} * cols, -2.0f, 2.0f);
    std::vector<int32_t> positions(tokens), slots(tokens);
    for (uint32_t t = 0; t < tokens; ++t) {
      positions[t] = static_cast<int32_t>(t * 37 + 5);
      slots[t] = t == 2 ? -1 : static_cast<int32_t>((t * 7 + 3) % (layout.page_tokens * 2 * pages_per_chunk));
    }
    const vk::Buffer xb = device_buffer(x), nb = device_buffer(norm), fb = device_buffer(factors);
    const vk::Buffer pb = device_buffer(positions), sb = device_buffer(slots);
    const QuantizedBuffers in(dev, tokens, cols, true);
    struct Run {
      std::vector<float> y;
      std::vector<uint16_t> pool;
    };
    auto run_path = [&](bool fused) {
      Kernels k(context(), Prewarm::No);
      const vk::Buffer yb = device_buffer(std::vector<float>(uint64_t{tokens} * rows));
      std::vector<vk::Buffer> chunks;
      for (uint32_t c = 0; c < 2; ++c)
        chunks.push_back(device_buffer(
            std::vector<uint16_t>(pool_init.begin() + c * pages_per_chunk * layout.page_elements(),
                                  pool_init.begin() + (c + 1) * pages_per_chunk * layout.page_elements())));
      RopeArgs rope;
      rope.positions = pb.view(0, uint64_t{tokens} * 4);
      rope.freq_factors = fb.view(0, factors.size() * 4);
      rope.n_tokens = tokens;
      rope.head_dim = head_dim;
      rope.rope_dims = rope_dims;
      rope.freq_base = 500000.0f;
      rope.token_stride = rows;
      vk::CommandRecorder rec(context());
      rec.begin();
      quantize(rec, k, xb, tokens, cols, nb.view(0, uint64_t{cols} * 4), in.view());
      MatvecQ8Args a;
      a.product = {{w.view(0, row_bytes(format, cols) * rows), format, rows, cols}, {}, yb.view(), tokens};
      a.x = in.view();
      a.norm = true;
      if (fused) {
        QkvToPages kv;
        kv.q_rows = q_rows;
        kv.rope = rope;
        kv.slots = sb.view(0, uint64_t{tokens} * 4);
        kv.pools = {chunks[0].view(), chunks[1].view(), {}, {}};
        kv.pages_per_binding = pages_per_chunk;
        kv.layout = layout;
        kv.layer = 1;
        a.qkv_pages = kv;
      }
      matvec_q8(rec, k, a);
      if (!fused) {
        for (uint32_t c = 0; c < 2; ++c) {
          KvWriteArgs kw;
          kw.k = yb.view(uint64_t{q_rows} * 4, (uint64_t{tokens} * rows - q_rows) * 4);
          kw.v = yb.view(uint64_t{q_rows + layout.kv_dim} * 4,
                         (uint64_t{tokens} * rows - q_rows - layout.kv_dim) * 4);
          kw.k_stride = kw.v_stride = rows;
          kw.slots = sb.view(0, uint64_t{tokens} * 4);
          kw.pages = chunks[c].view();
          kw.layout = layout;
          kw.layer = 1;
          kw.n_tokens = tokens;
          kw.page_begin = c * pages_per_chunk;
          kw.page_count = pages_per_chunk;
          RopeArgs q_rope = rope;
          q_rope.x = yb.view(0, uint64_t{tokens} * rows * 4);
          q_rope.n_heads = q_heads;
          kv_write_rope(rec, k, kw, rope, c == 0 ? &q_rope : nullptr);
        }
      }
      rec.end();
      rec.submit_and_wait();
      Run r{read_back<float>(yb, uint64_t{tokens} * rows), {}};
      for (const vk::Buffer& c : chunks) {
        const std::vector<uint16_t> part = read_back<uint16_t>(c, pages_per_chunk * layout.page_elements());
        r.pool.insert(r.pool.end(), part.begin(), part.end());
      }
      return r;
    };
    const Run fused = run_path(true), split = run_path(false);
    int bad = 0;
    for (size_t i = 0; i < fused.y.size() && bad < 5; ++i) {
      const bool q_row = i % rows < q_rows;
      const float tol = q_row ? 1e-6f * std::max(1.0f, std::abs(split.y[i])) : 0.0f;
      if (!(std::abs(fused.y[i] - split.y[i]) <= tol)) {
        ADD_FAILURE() << "y[" << i / rows << "][" << i % rows << "] = " << fused.y[i] << ", want "
                      << split.y[i];
        ++bad;
      }
    }
    size_t changed = 0;
    for (size_t i = 0; i < fused.pool.size() && bad < 10; ++i) {
      if (std::abs(int{fused.pool[i]} - int{split.pool[i]}) > 1) {
        ADD_FAILURE() << "pool element " << i << ": " << fused.pool[i] << ", want " << split.pool[i];
        ++bad;
      }
      changed += fused.pool[i] != pool_init[i];
    }
    // Every stored token wrote K and V of its slot: (tokens - 1 skipped) * 2 * kv_dim halves at most changed.
    EXPECT_GT(changed, 0u);
    EXPECT_LE(changed, uint64_t{tokens} * 2 * layout.kv_dim);
  }
}

// A matrix of many rows (the FFN's gate and up, the logits) takes lanes of one subgroup, each thread looping
// over several units: its products match the references and a token's bits do not depend on its batch.
TEST_P(MatvecQ8Test, ManyRowMatricesMatchReferenceAndAreBatchInvariant) {
  const TensorType type = GetParam();
  const uint32_t cols = test_cols(type).front(), rows = 16384 + 9;
  for (Fold fold : {Fold::Store, Fold::NormSwiglu}) {
    const uint32_t out_rows = fold == Fold::NormSwiglu ? rows / 2 + 1 : rows;
    check(type, out_rows, cols, fold, 1);
    check(type, out_rows, cols, fold, 9);
  }
  const TensorType format = device_format(type, cols);
  const HostMatrix m = random_matrix(type, rows, cols, rng());
  const vk::Buffer w = device_weights(m, type, rows, cols);
  const std::vector<float> x = random_floats(uint64_t{9} * cols, -2.0f, 2.0f);
  const std::vector<float> norm = random_floats(cols, 0.5f, 1.5f), y0(uint64_t{9} * rows);
  const std::vector<float> batch = run(w, format, rows, cols, Fold::Store, x, norm, y0, 9);
  const std::vector<float> x6(x.begin() + 6 * cols, x.begin() + 7 * cols);
  const std::vector<float> alone =
      run(w, format, rows, cols, Fold::Store, x6, norm, std::vector<float>(rows), 1);
  EXPECT_EQ(std::memcmp(alone.data(), batch.data() + uint64_t{6} * rows, rows * sizeof(float)), 0);
}

// The launch shape: a row lane is one subgroup, two for the residual products, for every token count (so a
// token's reduction order is the same alone and in a batch). One token takes a row a lane, 4 for SwiGLU and
// for the K-quants' and Q4_0's matrices of 16384 rows and more; with a quantized output 16 lanes of one row
// (the residual products, and Q4_0's and Q8_0's SwiGLU), else 4 lanes of 4 rows; batches take 2, 1 for
// SwiGLU, 4 with a quantized output (the residual product's two-subgroup lanes 2: 8 lanes of 2 rows).
TEST_F(MatvecQ8ShapeTest, ThreadsPerRowAreSubgroupsAndRowsPerLaneFollowTheMatrix) {
  const vk::Device& d = context().device();
  const uint32_t sg = d.subgroup_size();
  for (const TensorType type :
       {TensorType::Q4_0x8, TensorType::Q8_0x8, TensorType::Q6_Kx8, TensorType::Q4_K, TensorType::Q5_K}) {
    const bool four_many = type == TensorType::Q4_K || type == TensorType::Q5_K || type == TensorType::Q4_0x8;
    for (const uint64_t rows : {uint64_t{4096}, uint64_t{16383}, uint64_t{16384}, uint64_t{128256}}) {
      const MatvecQ8Shape one = matvec_q8_shape(d, type, rows, 1), batch = matvec_q8_shape(d, type, rows, 8);
      EXPECT_EQ(one.threads_per_row, std::min(sg, one.workgroup));
      EXPECT_EQ(batch.threads_per_row, one.threads_per_row);
      EXPECT_EQ(one.workgroup, batch.workgroup);
      EXPECT_EQ(one.rows_per_lane, four_many && rows >= 16384 ? kMatvecQ8Rows : kMatvecQ8RowsOne);
      EXPECT_EQ(batch.rows_per_lane, kMatvecQ8RowsPair);
      EXPECT_EQ(matvec_q8_shape(d, type, rows, 1, true).rows_per_lane, kMatvecQ8Rows);
      EXPECT_EQ(matvec_q8_shape(d, type, rows, 8, true).rows_per_lane, kMatvecQ8RowsOne);
      EXPECT_EQ(matvec_q8_shape(d, type, rows, 8, true, true).rows_per_lane, kMatvecQ8Rows);
      // Residual products (accumulate): lanes of two subgroups for every token count (lavapipe and NVIDIA
      // fit 16 of them in a work group).
      for (const uint32_t tokens : {1u, 4u, 8u})
        EXPECT_EQ(matvec_q8_shape(d, type, rows, tokens, false, false, true).threads_per_row, 2 * sg);
      // Quantized outputs: whole groups of 16 outputs a work group.
      for (const bool swiglu : {false, true}) {
        const uint32_t lane = swiglu ? sg : 2 * sg;
        const MatvecQ8Shape q = matvec_q8_shape(d, type, rows, 1, swiglu, true, !swiglu);
        EXPECT_EQ(q.threads_per_row, lane);
        EXPECT_EQ(q.workgroup / q.threads_per_row * q.rows_per_lane % 16, 0u);
        EXPECT_EQ(q.lanes16, !swiglu || type == TensorType::Q4_0x8 || type == TensorType::Q8_0x8);
        if (q.lanes16) {
          EXPECT_EQ(q.workgroup, 16 * lane);
        }
        const MatvecQ8Shape qb = matvec_q8_shape(d, type, rows, 8, swiglu, true, !swiglu);
        EXPECT_FALSE(qb.lanes16);
        EXPECT_EQ(qb.threads_per_row, lane);
        EXPECT_EQ(qb.workgroup / qb.threads_per_row * qb.rows_per_lane % 16, 0u);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatvecQ8Test,
                         ::testing::Values(TensorType::Q4_0, TensorType::Q8_0, TensorType::Q6_K,
                                           TensorType::Q4_K, TensorType::Q5_K),
                         [](const auto& p) { return std::string(tensor_type_info(p.param).name); });

TEST(MatvecQ8Support, DeviceFormatsAndKQuantsWithWholeGroups) {
  EXPECT_TRUE(matvec_q8_supported(TensorType::Q4_0x8, 4096));
  EXPECT_TRUE(matvec_q8_supported(TensorType::Q4_K, 14336));
  EXPECT_TRUE(matvec_q8_supported(TensorType::Q6_Kx8, 2048));
  EXPECT_FALSE(matvec_q8_supported(TensorType::Q4_0, 4096)) << "file layout: blocks are not 16-byte aligned";
  EXPECT_FALSE(matvec_q8_supported(TensorType::F16, 4096));
  EXPECT_FALSE(matvec_q8_supported(TensorType::Q6_Kx8, 1024)) << "not whole 2048-value groups";
}

}  // namespace
}  // namespace kvtrie::kernels
