// Contract: the hyper-parameters and weight tensors of one model, read from a GgufFile. from_gguf()
// refuses an unsupported architecture or missing/ill-shaped tensors with kvtrie::InputError naming the file
// and the problem. Immutable after construction; safe to read from any thread. ModelWeights points into the
// GgufFile, which must outlive it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runner/model/gguf_file.h"

namespace kvtrie {

enum class Architecture { Llama, Qwen2, Qwen3 };
enum class RopeType { Normal, Neox };  // Normal rotates adjacent pairs (llama); Neox rotates halves (qwen)

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  std::string arch_name;   // general.architecture
  std::string model_name;  // general.name, may be empty
  uint32_t n_layers = 0;
  uint32_t n_embd = 0;  // model width
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;  // GQA: n_heads % n_kv_heads == 0
  uint32_t head_dim_k = 0;  // attention.key_length, else n_embd / n_heads
  uint32_t head_dim_v = 0;  // attention.value_length, else n_embd / n_heads
  uint32_t n_ff = 0;
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  uint32_t rope_dims = 0;  // rope.dimension_count, else head_dim_k
  RopeType rope_type = RopeType::Normal;
  bool tied_output = false;     // no output.weight: logits use token_embd.weight
  bool has_qkv_bias = false;    // qwen2
  bool has_qk_norm = false;     // qwen3: per-head RMSNorm of q and k
  bool has_rope_freqs = false;  // llama3 rope frequency factors (rope_freqs.weight)

  static ModelConfig from_gguf(const GgufFile& file);  // throws InputError
};

struct LayerWeights {
  const GgufTensor* attn_norm = nullptr;
  const GgufTensor* wq = nullptr;
  const GgufTensor* wk = nullptr;
  const GgufTensor* wv = nullptr;
  const GgufTensor* wo = nullptr;
  const GgufTensor* bq = nullptr;  // qwen2 only
  const GgufTensor* bk = nullptr;
  const GgufTensor* bv = nullptr;
  const GgufTensor* q_norm = nullptr;  // qwen3 only
  const GgufTensor* k_norm = nullptr;
  const GgufTensor* ffn_norm = nullptr;
  const GgufTensor* w_gate = nullptr;
  const GgufTensor* w_up = nullptr;
  const GgufTensor* w_down = nullptr;
};

struct ModelWeights {
  const GgufTensor* token_embd = nullptr;
  const GgufTensor* output_norm = nullptr;
  const GgufTensor* output = nullptr;      // == token_embd when tied
  const GgufTensor* rope_freqs = nullptr;  // optional
  std::vector<LayerWeights> layers;

  // Finds every tensor the config needs and checks its shape and type; throws InputError.
  static ModelWeights from_gguf(const GgufFile& file, const ModelConfig& config);
};

}  // namespace kvtrie
