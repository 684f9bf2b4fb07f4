#include "runner/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "runner/model/quantization.h"

namespace kvtrie::reference {
namespace {

// Dot product accumulated in double over 8 interleaved partial sums: a fixed, deterministic order that
// the compiler can pipeline (one running sum would wait on every add's latency).
double dot(const float* a, const float* b, size_t n) {
  double acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) acc[j] += static_cast<double>(a[i + j]) * b[i + j];
  for (; i < n; ++i) acc[i % 8] += static_cast<double>(a[i]) * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void rms_norm(std::span<const float> x, std::span<const float> weight, float eps, std::span<float> out) {
  KVTRIE_CHECK(weight.size() == x.size() && out.size() == x.size(), "rms_norm: sizes differ");
  KVTRIE_CHECK(!x.empty(), "rms_norm of an empty vector");
  const double sum_sq = dot(x.data(), x.data(), x.size());
  const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(x.size()) + static_cast<double>(eps));
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] * inv * weight[i]);
}

void rms_norm_heads(std::span<float> x, std::span<const float> weight, uint32_t head_dim, float eps) {
  KVTRIE_CHECK(head_dim > 0 && x.size() % head_dim == 0, "rms_norm_heads: size is not whole heads");
  for (size_t off = 0; off < x.size(); off += head_dim) {
    std::span<float> head = x.subspan(off, head_dim);
    rms_norm(head, weight, eps, head);
  }
}

double rope_angle(uint32_t pos, uint32_t pair, uint32_t rope_dims, float freq_base,
                  std::span<const float> freq_factors) {
  const double exponent = -2.0 * static_cast<double>(pair) / static_cast<double>(rope_dims);
  double angle = static_cast<double>(pos) * std::pow(static_cast<double>(freq_base), exponent);
  if (!freq_factors.empty()) angle /= static_cast<double>(freq_factors[pair]);
  return angle;
}

void rope(std::span<float> head, uint32_t pos, uint32_t rope_dims, float freq_base, RopeType type,
          std::span<const float> freq_factors) {
  KVTRIE_CHECK(rope_dims % 2 == 0 && rope_dims <= head.size(),
               "rope: rope_dims must be even and fit the head");
  const uint32_t half = rope_dims / 2;
  KVTRIE_CHECK(freq_factors.empty() || freq_factors.size() == half,
               "rope: need rope_dims/2 frequency factors");
  for (uint32_t pair = 0; pair < half; ++pair) {
    const double angle = rope_angle(pos, pair, rope_dims, freq_base, freq_factors);
    const double c = std::cos(angle);
    const double s = std::sin(angle);
    const size_t ia = type == RopeType::Normal ? 2 * pair : pair;
    const size_t ib = type == RopeType::Normal ? 2 * pair + 1 : pair + half;
    const double a = head[ia];
    const double b = head[ib];
    head[ia] = static_cast<float>(a * c - b * s);
    head[ib] = static_cast<float>(a * s + b * c);
  }
}

void rope_heads(std::span<float> x, uint32_t head_dim, uint32_t pos, uint32_t rope_dims, float freq_base,
                RopeType type, std::span<const float> freq_factors) {
  KVTRIE_CHECK(head_dim > 0 && x.size() % head_dim == 0, "rope_heads: size is not whole heads");
  for (size_t off = 0; off < x.size(); off += head_dim)
    rope(x.subspan(off, head_dim), pos, rope_dims, freq_base, type, freq_factors);
}

void matvec(std::span<const float> w, std::span<const float> x, std::span<float> y) {
  KVTRIE_CHECK(w.size() == x.size() * y.size(), "matvec: weight is not rows x cols");
  const size_t cols = x.size();
  for (size_t r = 0; r < y.size(); ++r) {
    y[r] = static_cast<float>(dot(w.data() + r * cols, x.data(), cols));
  }
}

void matvec(TensorType type, std::span<const uint8_t> w, std::span<const float> x, std::span<float> y) {
  const size_t cols = x.size();
  KVTRIE_CHECK(cols % tensor_type_info(type).block_elements == 0, "matvec: rows are not whole blocks");
  const uint64_t stride = row_bytes(type, cols);
  KVTRIE_CHECK(w.size() == stride * y.size(), "matvec: weight is not rows x row_bytes");
  std::vector<float> row(cols);
  for (size_t r = 0; r < y.size(); ++r) {
    dequantize_row(type, w.data() + r * stride, row.data(), cols);
    y[r] = static_cast<float>(dot(row.data(), x.data(), cols));
  }
}

void matmul(std::span<const float> w, std::span<const float> x, uint32_t n_tokens, std::span<float> y) {
  KVTRIE_CHECK(n_tokens > 0 && x.size() % n_tokens == 0 && y.size() % n_tokens == 0, "matmul: batch sizes");
  const size_t cols = x.size() / n_tokens;
  const size_t rows = y.size() / n_tokens;
  for (uint32_t t = 0; t < n_tokens; ++t) matvec(w, x.subspan(t * cols, cols), y.subspan(t * rows, rows));
}

void add(std::span<float> dst, std::span<const float> src) {
  KVTRIE_CHECK(dst.size() == src.size(), "add: sizes differ");
  for (size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
}

float silu(float x) {
  return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x))));
}

void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  KVTRIE_CHECK(gate.size() == up.size() && out.size() == up.size(), "swiglu: sizes differ");
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(silu(gate[i])) * up[i]);
}

void softmax(std::span<float> x) {
  if (x.empty()) return;
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (float& v : x) {
    v = static_cast<float>(std::exp(static_cast<double>(v) - max));
    sum += v;
  }
  for (float& v : x) v = static_cast<float>(v / sum);
}

uint32_t kv_head_for(uint32_t head, uint32_t n_heads, uint32_t n_kv_heads) {
  KVTRIE_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "GQA: n_heads must be a multiple of n_kv_heads");
  KVTRIE_CHECK(head < n_heads, "GQA: head out of range");
  return head / (n_heads / n_kv_heads);
}

void attention(std::span<const float> q, std::span<const float> keys, std::span<const float> values,
               uint32_t n_pos, const AttentionShape& shape, std::span<float> out, float scale) {
  const size_t kv_k = static_cast<size_t>(shape.n_kv_heads) * shape.head_dim_k;
  const size_t kv_v = static_cast<size_t>(shape.n_kv_heads) * shape.head_dim_v;
  KVTRIE_CHECK(n_pos > 0, "attention over no positions");
  KVTRIE_CHECK(q.size() == static_cast<size_t>(shape.n_heads) * shape.head_dim_k, "attention: q size");
  KVTRIE_CHECK(out.size() == static_cast<size_t>(shape.n_heads) * shape.head_dim_v, "attention: out size");
  KVTRIE_CHECK(keys.size() >= n_pos * kv_k && values.size() >= n_pos * kv_v, "attention: cache too short");
  const double s = scale != 0.0f ? scale : 1.0 / std::sqrt(static_cast<double>(shape.head_dim_k));
  std::vector<double> p(n_pos);
  for (uint32_t h = 0; h < shape.n_heads; ++h) {
    const uint32_t kvh = kv_head_for(h, shape.n_heads, shape.n_kv_heads);
    const float* qh = q.data() + static_cast<size_t>(h) * shape.head_dim_k;
    double max = -INFINITY;
    for (uint32_t t = 0; t < n_pos; ++t) {
      const float* k = keys.data() + t * kv_k + static_cast<size_t>(kvh) * shape.head_dim_k;
      p[t] = dot(qh, k, shape.head_dim_k) * s;
      max = std::max(max, p[t]);
    }
    double sum = 0.0;
    for (double& v : p) {
      v = std::exp(v - max);
      sum += v;
    }
    float* oh = out.data() + static_cast<size_t>(h) * shape.head_dim_v;
    for (uint32_t d = 0; d < shape.head_dim_v; ++d) {
      double acc = 0.0;
      for (uint32_t t = 0; t < n_pos; ++t)
        acc += p[t] * values[t * kv_v + static_cast<size_t>(kvh) * shape.head_dim_v + d];
      oh[d] = static_cast<float>(acc / sum);
    }
  }
}

void attention_causal(std::span<const float> q, std::span<const float> keys, std::span<const float> values,
                      uint32_t first_pos, uint32_t n_tokens, const AttentionShape& shape,
                      std::span<float> out, float scale) {
  const size_t q_row = static_cast<size_t>(shape.n_heads) * shape.head_dim_k;
  const size_t out_row = static_cast<size_t>(shape.n_heads) * shape.head_dim_v;
  KVTRIE_CHECK(q.size() == n_tokens * q_row && out.size() == n_tokens * out_row, "attention_causal: sizes");
  for (uint32_t t = 0; t < n_tokens; ++t)
    attention(q.subspan(t * q_row, q_row), keys, values, first_pos + t + 1, shape,
              out.subspan(t * out_row, out_row), scale);
}

int32_t argmax(std::span<const float> x) {
  KVTRIE_CHECK(!x.empty(), "argmax of an empty vector");
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[best]) best = i;  // strict: the lowest index wins ties
  return static_cast<int32_t>(best);
}

std::vector<float> dequantize_tensor(const GgufTensor& tensor) {
  KVTRIE_CHECK(!tensor.shape.empty(), "tensor " + tensor.name + " has no shape");
  const uint64_t cols = tensor.shape[0];
  uint64_t rows = 1;
  for (size_t i = 1; i < tensor.shape.size(); ++i) rows *= tensor.shape[i];
  const uint64_t stride = row_bytes(tensor.type, cols);
  KVTRIE_CHECK(tensor.data.size() >= rows * stride, "tensor " + tensor.name + " is shorter than its shape");
  std::vector<float> out(rows * cols);
  for (uint64_t r = 0; r < rows; ++r)
    dequantize_row(tensor.type, tensor.data.data() + r * stride, out.data() + r * cols, cols);
  return out;
}

std::vector<float> dequantize_tensor_row(const GgufTensor& tensor, uint64_t row) {
  KVTRIE_CHECK(!tensor.shape.empty(), "tensor " + tensor.name + " has no shape");
  const uint64_t cols = tensor.shape[0];
  const uint64_t stride = row_bytes(tensor.type, cols);
  KVTRIE_CHECK((row + 1) * stride <= tensor.data.size(), "row out of range in tensor " + tensor.name);
  std::vector<float> out(cols);
  dequantize_row(tensor.type, tensor.data.data() + row * stride, out.data(), cols);
  return out;
}

}  // namespace kvtrie::reference
