// Contract: the individual CPU float32 operations of the forward pass, written plainly so that they can serve
// as the oracle every Vulkan shader is compared against (tests/kernels call them one by one). Pure free
// functions over caller-owned spans: no state, no allocation except where a vector is returned, safe from any
// thread. Reductions accumulate in double so the oracle is more accurate than any kernel tested against it.
// Sizes that do not fit each other are caller bugs and throw kvtrie::Error (KVTRIE_CHECK).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "base/tensor_type.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"

namespace kvtrie::reference {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]. `out` may alias `x`.
void rms_norm(std::span<const float> x, std::span<const float> weight, float eps, std::span<float> out);

// RMSNorm of each of the head_dim-sized slices of `x` (qwen3's q/k norm), in place, with one shared
// weight of head_dim values.
void rms_norm_heads(std::span<float> x, std::span<const float> weight, uint32_t head_dim, float eps);

// The rotation angle of dimension pair `pair` (0 <= pair < rope_dims / 2) at position `pos`:
// pos * freq_base^(-2 pair / rope_dims) / freq_factors[pair] (factors absent: 1).
double rope_angle(uint32_t pos, uint32_t pair, uint32_t rope_dims, float freq_base,
                  std::span<const float> freq_factors);

// Rotary embedding of one head vector in place. Only the first rope_dims values rotate; the rest pass
// through. Normal rotates adjacent pairs (2i, 2i+1); Neox rotates (i, i + rope_dims/2). A pair (a, b) with
// angle t becomes (a cos t - b sin t, a sin t + b cos t). freq_factors, when not empty, holds rope_dims/2
// llama3 factors that divide each pair's frequency.
void rope(std::span<float> head, uint32_t pos, uint32_t rope_dims, float freq_base, RopeType type,
          std::span<const float> freq_factors = {});

// rope() applied to each head_dim-sized slice of `x` (all heads of one token).
void rope_heads(std::span<float> x, uint32_t head_dim, uint32_t pos, uint32_t rope_dims, float freq_base,
                RopeType type, std::span<const float> freq_factors = {});

// y = W x where W is row-major with y.size() rows of x.size() values (GGUF's layout: one row per output).
void matvec(std::span<const float> w, std::span<const float> x, std::span<float> y);

// The same product over a quantized (or F16/BF16/F32) weight: `w` holds y.size() rows of x.size() values in
// `type`'s layout (row_bytes(type, x.size()) bytes each), dequantized one row at a time.
void matvec(TensorType type, std::span<const uint8_t> w, std::span<const float> x, std::span<float> y);

// Y = X W^T for a batch: x holds n_tokens rows of cols values, y n_tokens rows of w.size() / cols values.
// Row t of y is exactly matvec(w, row t of x) (same summation order: batch-invariant by construction).
void matmul(std::span<const float> w, std::span<const float> x, uint32_t n_tokens, std::span<float> y);

// dst[i] += src[i] (residual adds and biases).
void add(std::span<float> dst, std::span<const float> src);

float silu(float x);  // x / (1 + e^-x)

// out[i] = silu(gate[i]) * up[i]. `out` may alias either input.
void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// Numerically stable softmax in place (the maximum is subtracted first).
void softmax(std::span<float> x);

// GQA: query head `head` reads KV head head / (n_heads / n_kv_heads).
uint32_t kv_head_for(uint32_t head, uint32_t n_heads, uint32_t n_kv_heads);

struct AttentionShape {
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim_k = 0;
  uint32_t head_dim_v = 0;
};

// Softmax attention of one token's queries over n_pos cached positions (the caller passes exactly the
// positions the token may see: causal masking is the caller choosing n_pos).
//   q:      n_heads * head_dim_k
//   keys:   n_pos * n_kv_heads * head_dim_k   (position-major, then KV head)
//   values: n_pos * n_kv_heads * head_dim_v
//   out:    n_heads * head_dim_v
// Scores are q.k * scale (scale 0 means 1/sqrt(head_dim_k)).
void attention(std::span<const float> q, std::span<const float> keys, std::span<const float> values,
               uint32_t n_pos, const AttentionShape& shape, std::span<float> out, float scale = 0.0f);

// Causal attention of a batch of n_tokens consecutive tokens of one sequence at positions first_pos ..
// first_pos + n_tokens - 1 (prefill): token t sees positions 0 .. first_pos + t. q and out hold n_tokens rows
// (n_heads * head_dim_k, n_heads * head_dim_v values each); keys/values hold at least first_pos + n_tokens
// positions. Row t equals attention() of that token alone with n_pos = first_pos + t + 1.
void attention_causal(std::span<const float> q, std::span<const float> keys, std::span<const float> values,
                      uint32_t first_pos, uint32_t n_tokens, const AttentionShape& shape,
                      std::span<float> out, float scale = 0.0f);

// Index of the largest value; the lowest index wins ties (the greedy sampling rule of the golden tests).
int32_t argmax(std::span<const float> x);

// Every element of a tensor (any supported type) as float32, rows in order.
std::vector<float> dequantize_tensor(const GgufTensor& tensor);
// One row (shape[0] values) of a tensor as float32: e.g. the embedding of token `row` in token_embd.
std::vector<float> dequantize_tensor_row(const GgufTensor& tensor, uint64_t row);

}  // namespace kvtrie::reference
