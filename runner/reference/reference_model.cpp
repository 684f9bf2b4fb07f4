#include "runner/reference/reference_model.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "runner/model/quantization.h"
#include "runner/reference/reference_ops.h"

namespace kvtrie::reference {
namespace {

std::vector<float> load(const GgufTensor* tensor) {
  return tensor ? dequantize_tensor(*tensor) : std::vector<float>{};
}

}  // namespace

void ReferenceModel::Sequence::truncate(uint32_t n) {
  KVTRIE_CHECK(n <= length_, "truncate beyond the sequence length");
  for (auto& k : keys_) k.resize(n * kv_k_);
  for (auto& v : values_) v.resize(n * kv_v_);
  length_ = n;
}

ReferenceModel::ReferenceModel(const GgufFile& file, const ReferenceOptions& options)
    : config_(ModelConfig::from_gguf(file)), f16_kv_(options.f16_kv) {
  const ModelWeights weights = ModelWeights::from_gguf(file, config_);
  token_embd_ = load(weights.token_embd);
  output_norm_ = load(weights.output_norm);
  if (!config_.tied_output && weights.output != weights.token_embd) output_ = load(weights.output);
  if (config_.has_rope_freqs) rope_freqs_ = load(weights.rope_freqs);
  KVTRIE_CHECK(weights.layers.size() == config_.n_layers, "ModelWeights has the wrong number of layers");
  layers_.reserve(config_.n_layers);
  for (const LayerWeights& lw : weights.layers) {
    Layer layer;
    layer.attn_norm = load(lw.attn_norm);
    layer.wq = load(lw.wq);
    layer.wk = load(lw.wk);
    layer.wv = load(lw.wv);
    layer.wo = load(lw.wo);
    if (config_.has_qkv_bias) {
      layer.bq = load(lw.bq);
      layer.bk = load(lw.bk);
      layer.bv = load(lw.bv);
    }
    if (config_.has_qk_norm) {
      layer.q_norm = load(lw.q_norm);
      layer.k_norm = load(lw.k_norm);
    }
    layer.ffn_norm = load(lw.ffn_norm);
    layer.w_gate = load(lw.w_gate);
    layer.w_up = load(lw.w_up);
    layer.w_down = load(lw.w_down);
    layers_.push_back(std::move(layer));
  }
}

ReferenceModel::Sequence ReferenceModel::new_sequence() const {
  Sequence seq;
  seq.keys_.resize(config_.n_layers);
  seq.values_.resize(config_.n_layers);
  seq.kv_k_ = static_cast<size_t>(config_.n_kv_heads) * config_.head_dim_k;
  seq.kv_v_ = static_cast<size_t>(config_.n_kv_heads) * config_.head_dim_v;
  return seq;
}

std::vector<float> ReferenceModel::hidden(Sequence& seq, int32_t token, Trace* trace) const {
  const ModelConfig& c = config_;
  KVTRIE_CHECK(token >= 0 && static_cast<uint32_t>(token) < c.n_vocab,
               "token id " + std::to_string(token) + " is outside the vocabulary");
  KVTRIE_CHECK(
      seq.keys_.size() == c.n_layers && seq.kv_k_ == static_cast<size_t>(c.n_kv_heads) * c.head_dim_k,
      "the sequence was not made by this model");
  const uint32_t pos = seq.length_;
  const size_t n_embd = c.n_embd;
  const size_t q_size = static_cast<size_t>(c.n_heads) * c.head_dim_k;
  const size_t attn_size = static_cast<size_t>(c.n_heads) * c.head_dim_v;
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim_k, c.head_dim_v};

  std::vector<float> x(token_embd_.begin() + static_cast<ptrdiff_t>(token * n_embd),
                       token_embd_.begin() + static_cast<ptrdiff_t>((token + 1) * n_embd));
  std::vector<float> h(n_embd), q(q_size), k(seq.kv_k_), v(seq.kv_v_), attn(attn_size), proj(n_embd);
  std::vector<float> gate(c.n_ff), up(c.n_ff);
  if (trace) {
    trace->embedding = x;
    trace->layers.assign(c.n_layers, LayerTrace{});
  }

  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const Layer& layer = layers_[l];
    // Attention block: x += Wo · attention(rope(norm_q(Wq h + bq)), rope(norm_k(Wk h + bk)), Wv h + bv).
    rms_norm(x, layer.attn_norm, c.rms_eps, h);
    matvec(layer.wq, h, q);
    matvec(layer.wk, h, k);
    matvec(layer.wv, h, v);
    if (c.has_qkv_bias) {
      add(q, layer.bq);
      add(k, layer.bk);
      add(v, layer.bv);
    }
    if (c.has_qk_norm) {
      rms_norm_heads(q, layer.q_norm, c.head_dim_k, c.rms_eps);
      rms_norm_heads(k, layer.k_norm, c.head_dim_k, c.rms_eps);
    }
    rope_heads(q, c.head_dim_k, pos, c.rope_dims, c.rope_freq_base, c.rope_type, rope_freqs_);
    rope_heads(k, c.head_dim_k, pos, c.rope_dims, c.rope_freq_base, c.rope_type, rope_freqs_);
    if (f16_kv_) {
      for (float& e : k) e = fp16_to_fp32(fp32_to_fp16(e));
      for (float& e : v) e = fp16_to_fp32(fp32_to_fp16(e));
    }
    seq.keys_[l].insert(seq.keys_[l].end(), k.begin(), k.end());
    seq.values_[l].insert(seq.values_[l].end(), v.begin(), v.end());
    attention(q, seq.keys_[l], seq.values_[l], pos + 1, shape, attn);
    matvec(layer.wo, attn, proj);
    add(x, proj);
    if (trace) {
      LayerTrace& t = trace->layers[l];
      t.attn_in = h;
      t.q = q;
      t.k = k;
      t.v = v;
      t.attn_out = attn;
      t.x_after_attn = x;
    }

    // Feed-forward block: x += Wdown · (silu(Wgate h) * Wup h).
    rms_norm(x, layer.ffn_norm, c.rms_eps, h);
    matvec(layer.w_gate, h, gate);
    matvec(layer.w_up, h, up);
    swiglu(gate, up, gate);
    matvec(layer.w_down, gate, proj);
    add(x, proj);
    if (trace) {
      LayerTrace& t = trace->layers[l];
      t.ffn_in = h;
      t.ffn_act = gate;
      t.x_after_ffn = x;
    }
  }
  seq.length_ = pos + 1;
  return x;
}

std::vector<float> ReferenceModel::logits(std::span<const float> hidden_state, Trace* trace) const {
  std::vector<float> normed(config_.n_embd);
  rms_norm(hidden_state, output_norm_, config_.rms_eps, normed);
  if (trace) trace->final_norm = normed;
  std::vector<float> out(config_.n_vocab);
  matvec(output_.empty() ? token_embd_ : output_, normed, out);
  return out;
}

std::vector<float> ReferenceModel::forward(Sequence& seq, int32_t token) const {
  return logits(hidden(seq, token, nullptr), nullptr);
}

std::vector<float> ReferenceModel::forward(Sequence& seq, int32_t token, Trace& trace) const {
  return logits(hidden(seq, token, &trace), &trace);
}

std::vector<float> ReferenceModel::forward_batch(Sequence& seq, std::span<const int32_t> tokens) const {
  KVTRIE_CHECK(!tokens.empty(), "forward_batch of no tokens");
  // Only the last token's logits are wanted; the others need just their K/V.
  for (size_t i = 0; i + 1 < tokens.size(); ++i) hidden(seq, tokens[i], nullptr);
  return forward(seq, tokens.back());
}

std::vector<float> ReferenceModel::forward_all(Sequence& seq, std::span<const int32_t> tokens) const {
  std::vector<float> all;
  all.reserve(tokens.size() * config_.n_vocab);
  for (int32_t token : tokens) {
    const std::vector<float> row = forward(seq, token);
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

std::vector<int32_t> ReferenceModel::generate_greedy(Sequence& seq, std::span<const int32_t> prompt,
                                                     uint32_t max_tokens,
                                                     std::span<const int32_t> stop) const {
  std::vector<int32_t> generated;
  if (max_tokens == 0) return generated;
  std::vector<float> row = forward_batch(seq, prompt);
  while (true) {
    const int32_t next = argmax(row);
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) break;
    generated.push_back(next);
    if (generated.size() == max_tokens) break;
    row = forward(seq, next);
  }
  return generated;
}

}  // namespace kvtrie::reference
