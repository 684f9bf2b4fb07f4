#include "runner/model/model_config.h"

#include <cmath>
#include <limits>

#include "base/error.h"

namespace kvtrie {

namespace {

[[noreturn]] void fail(const GgufFile& file, const std::string& problem) {
  throw InputError(file.path().string() + ": " + problem);
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A hyper-parameter stored as a positive integer that fits comfortably in uint32 (per-layer arrays, used by
// some other architectures, are refused by name).
std::optional<uint32_t> get_dim(const GgufFile& file, const std::string& key, bool required) {
  const GgufEntry* e = file.find(key);
  if (!e) {
    if (required) fail(file, "missing metadata key " + key);
    return std::nullopt;
  }
  if (e->type == GgufValueType::ARRAY)
    fail(file, "metadata " + key + " is an array (per-layer values are not supported)");
  const std::optional<uint64_t> v = file.get_uint(key);
  if (!v) fail(file, "metadata " + key + " must be a non-negative integer");
  if (*v == 0 || *v > (uint64_t{1} << 30))
    fail(file, "metadata " + key + " = " + std::to_string(*v) + " is out of range");
  return static_cast<uint32_t>(*v);
}

std::optional<float> get_positive_float(const GgufFile& file, const std::string& key) {
  if (!file.find(key)) return std::nullopt;
  const std::optional<double> v = file.get_float(key);
  if (!v || !std::isfinite(*v) || *v <= 0 || *v > std::numeric_limits<float>::max())
    fail(file, "metadata " + key + " must be a positive finite number");
  return static_cast<float>(*v);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& file) {
  ModelConfig c;
  const std::optional<std::string_view> arch = file.get_string("general.architecture");
  if (!arch) fail(file, "missing metadata key general.architecture (a string)");
  c.arch_name = std::string(*arch);
  if (c.arch_name == "llama") {
    c.arch = Architecture::Llama;
    c.rope_type = RopeType::Normal;
  } else if (c.arch_name == "qwen2") {
    c.arch = Architecture::Qwen2;
    c.rope_type = RopeType::Neox;
    c.has_qkv_bias = true;
  } else if (c.arch_name == "qwen3") {
    c.arch = Architecture::Qwen3;
    c.rope_type = RopeType::Neox;
    c.has_qk_norm = true;
  } else {
    std::string shown;
    for (char ch : c.arch_name.substr(0, 64)) shown += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
    fail(file, "unsupported architecture '" + shown + "' (supported: llama, qwen2, qwen3)");
  }
  if (const auto name = file.get_string("general.name")) c.model_name = std::string(*name);

  const std::string p = c.arch_name + ".";
  c.n_layers = *get_dim(file, p + "block_count", true);
  c.n_embd = *get_dim(file, p + "embedding_length", true);
  c.n_heads = *get_dim(file, p + "attention.head_count", true);
  c.n_kv_heads = get_dim(file, p + "attention.head_count_kv", false).value_or(c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    fail(file, "attention.head_count " + std::to_string(c.n_heads) + " is not a multiple of head_count_kv " +
                   std::to_string(c.n_kv_heads));
  const uint32_t default_head_dim = c.n_embd / c.n_heads;
  if (c.n_embd % c.n_heads != 0 &&
      (!file.find(p + "attention.key_length") || !file.find(p + "attention.value_length")))
    fail(file, "embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " +
                   std::to_string(c.n_heads) + " and attention.key_length/value_length are not given");
  c.head_dim_k = get_dim(file, p + "attention.key_length", false).value_or(default_head_dim);
  c.head_dim_v = get_dim(file, p + "attention.value_length", false).value_or(default_head_dim);
  if (c.head_dim_k == 0 || c.head_dim_v == 0)
    fail(file, "head dimension is zero (embedding_length " + std::to_string(c.n_embd) + " < head_count " +
                   std::to_string(c.n_heads) + ")");
  c.n_ff = *get_dim(file, p + "feed_forward_length", true);
  c.n_ctx_train = get_dim(file, p + "context_length", false).value_or(2048);
  c.rms_eps = get_positive_float(file, p + "attention.layer_norm_rms_epsilon").value_or(1e-5f);
  c.rope_freq_base = get_positive_float(file, p + "rope.freq_base").value_or(10000.0f);
  c.rope_dims = get_dim(file, p + "rope.dimension_count", false).value_or(c.head_dim_k);
  if (c.rope_dims > c.head_dim_k || c.rope_dims % 2 != 0)
    fail(file, "rope.dimension_count " + std::to_string(c.rope_dims) +
                   " must be even and at most the head dimension " + std::to_string(c.head_dim_k));

  if (file.find("tokenizer.ggml.tokens")) {
    const std::vector<std::string>* list = file.get_string_array("tokenizer.ggml.tokens");
    if (!list) fail(file, "tokenizer.ggml.tokens must be an array of strings");
    if (list->empty() || list->size() > (size_t{1} << 30)) fail(file, "tokenizer.ggml.tokens has a bad size");
    c.n_vocab = static_cast<uint32_t>(list->size());
  } else if (auto v = get_dim(file, p + "vocab_size", false)) {
    c.n_vocab = *v;
  } else if (const GgufTensor* embd = file.find_tensor("token_embd.weight");
             embd && embd->shape.size() >= 2) {
    if (embd->shape[1] > (uint64_t{1} << 30)) fail(file, "token_embd.weight has too many rows");
    c.n_vocab = static_cast<uint32_t>(embd->shape[1]);
  } else {
    fail(file, "cannot determine the vocabulary size (no tokenizer.ggml.tokens, " + p +
                   "vocab_size or token_embd.weight)");
  }

  c.tied_output = file.find_tensor("output.weight") == nullptr;
  c.has_rope_freqs = file.find_tensor("rope_freqs.weight") != nullptr;
  // Some llama-family exports carry attention biases too; they are used when present.
  if (c.arch == Architecture::Llama && file.find_tensor("blk.0.attn_q.bias")) c.has_qkv_bias = true;
  return c;
}

namespace {

class Finder {
 public:
  explicit Finder(const GgufFile& file) : file_(file) {}

  // The tensor, or nullptr when optional and absent; checks the shape (ignoring trailing 1s) and that 1-D
  // tensors (norms, biases, rope factors) are F32.
  const GgufTensor* get(const std::string& name, std::vector<uint64_t> shape, bool required = true) const {
    const GgufTensor* t = file_.find_tensor(name);
    if (!t) {
      if (required) fail(file_, "missing tensor " + name);
      return nullptr;
    }
    std::vector<uint64_t> actual = t->shape;
    while (actual.size() > 1 && actual.back() == 1) actual.pop_back();
    while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
    if (actual != shape)
      fail(file_, "tensor " + name + " has the wrong shape " + shape_string(t->shape) + " (expected " +
                      shape_string(shape) + ")");
    if (shape.size() == 1 && t->type != TensorType::F32)
      fail(file_, "tensor " + name + " has type " + std::string(tensor_type_info(t->type).name) +
                      " (1-D tensors must be F32)");
    return t;
  }

 private:
  const GgufFile& file_;
};

}  // namespace

ModelWeights ModelWeights::from_gguf(const GgufFile& file, const ModelConfig& c) {
  const Finder f(file);
  const uint64_t embd = c.n_embd, q_dim = uint64_t{c.n_heads} * c.head_dim_k,
                 k_dim = uint64_t{c.n_kv_heads} * c.head_dim_k, v_dim = uint64_t{c.n_kv_heads} * c.head_dim_v,
                 o_dim = uint64_t{c.n_heads} * c.head_dim_v;
  ModelWeights w;
  w.token_embd = f.get("token_embd.weight", {embd, c.n_vocab});
  w.output_norm = f.get("output_norm.weight", {embd});
  w.output = c.tied_output ? w.token_embd : f.get("output.weight", {embd, c.n_vocab});
  w.rope_freqs = f.get("rope_freqs.weight", {c.rope_dims / 2}, c.has_rope_freqs);
  // Layers are appended one by one (never resized up front): a corrupt block_count fails at the first
  // missing tensor instead of allocating for billions of layers.
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers.emplace_back();
    l.attn_norm = f.get(b + "attn_norm.weight", {embd});
    l.wq = f.get(b + "attn_q.weight", {embd, q_dim});
    l.wk = f.get(b + "attn_k.weight", {embd, k_dim});
    l.wv = f.get(b + "attn_v.weight", {embd, v_dim});
    l.wo = f.get(b + "attn_output.weight", {o_dim, embd});
    if (c.has_qkv_bias) {
      l.bq = f.get(b + "attn_q.bias", {q_dim});
      l.bk = f.get(b + "attn_k.bias", {k_dim});
      l.bv = f.get(b + "attn_v.bias", {v_dim});
    }
    if (c.has_qk_norm) {
      l.q_norm = f.get(b + "attn_q_norm.weight", {c.head_dim_k});
      l.k_norm = f.get(b + "attn_k_norm.weight", {c.head_dim_k});
    }
    l.ffn_norm = f.get(b + "ffn_norm.weight", {embd});
    l.w_gate = f.get(b + "ffn_gate.weight", {embd, c.n_ff});
    l.w_up = f.get(b + "ffn_up.weight", {embd, c.n_ff});
    l.w_down = f.get(b + "ffn_down.weight", {c.n_ff, embd});
  }
  return w;
}

}  // namespace kvtrie
