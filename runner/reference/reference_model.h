// Contract: the CPU float32 forward pass of a whole model (llama, qwen2, qwen3), the oracle the Vulkan model
// is tested against; plain and readable, not a product path. The constructor reads the config and
// dequantizes every weight to float32 (so memory is 4 bytes per parameter: meant for tiny and test models;
// the GgufFile need not outlive the ReferenceModel). After construction the model is immutable: its const
// methods may run from any number of threads at once, each on its own Sequence. A Sequence is a plain value
// holding one conversation's K/V per layer; copying it forks the conversation. A Sequence must only be used
// with the model that made it. Token ids outside the vocabulary and other caller bugs throw kvtrie::Error.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"

namespace kvtrie::reference {

struct ReferenceOptions {
  // Store K and V rounded to f16, as the GPU's pages hold them.
  bool f16_kv = false;
};

class ReferenceModel {
 public:
  // One conversation's KV cache: K and V of every layer for positions 0 .. length()-1.
  // Layout per layer: keys [pos][kv_head][head_dim_k] (after rope, after qwen3's k norm), values
  // [pos][kv_head][head_dim_v] -- the same values a GPU KV cache should hold.
  class Sequence {
   public:
    uint32_t length() const { return length_; }
    std::span<const float> keys(uint32_t layer) const { return keys_.at(layer); }
    std::span<const float> values(uint32_t layer) const { return values_.at(layer); }
    // Forget positions n .. length()-1 (n <= length()), e.g. to roll back to a shared prefix.
    void truncate(uint32_t n);

   private:
    friend class ReferenceModel;
    std::vector<std::vector<float>> keys_;    // per layer
    std::vector<std::vector<float>> values_;  // per layer
    uint32_t length_ = 0;
    size_t kv_k_ = 0;  // floats per position per layer: n_kv_heads * head_dim_k
    size_t kv_v_ = 0;
  };

  // Every intermediate of one token's forward pass, for finding the first op where a GPU model departs from
  // the reference. Vectors are exactly what the forward pass computed at that point.
  struct LayerTrace {
    std::vector<float> attn_in;       // rms_norm(x, attn_norm)
    std::vector<float> q, k, v;       // after bias, q/k norm and rope (k, v are what the sequence stored)
    std::vector<float> attn_out;      // attention output, before Wo: n_heads * head_dim_v
    std::vector<float> x_after_attn;  // residual stream after the attention block
    std::vector<float> ffn_in;        // rms_norm(x, ffn_norm)
    std::vector<float> ffn_act;       // silu(gate) * up
    std::vector<float> x_after_ffn;   // residual stream after the layer
  };
  struct Trace {
    std::vector<float> embedding;  // the token's embedding row
    std::vector<LayerTrace> layers;
    std::vector<float> final_norm;  // rms_norm(x, output_norm)
  };

  // Throws InputError for unsupported/ill-formed models.
  explicit ReferenceModel(const GgufFile& file, const ReferenceOptions& options = {});

  const ModelConfig& config() const { return config_; }

  Sequence new_sequence() const;

  // Runs `token` at position seq.length(), appends its K/V to seq, returns its n_vocab logits.
  std::vector<float> forward(Sequence& seq, int32_t token) const;
  // The same, recording every intermediate into `trace` (overwritten).
  std::vector<float> forward(Sequence& seq, int32_t token, Trace& trace) const;
  // Runs the tokens in order (tokens must not be empty); returns the logits of the last one.
  std::vector<float> forward_batch(Sequence& seq, std::span<const int32_t> tokens) const;
  // Runs the tokens in order; returns every token's logits, row-major: tokens.size() x n_vocab.
  std::vector<float> forward_all(Sequence& seq, std::span<const int32_t> tokens) const;

  // Greedy decoding (argmax, lowest id on ties): feeds `prompt`, then generates up to max_tokens tokens,
  // stopping before any token in `stop` (which is neither returned nor fed). Returns the generated ids. seq
  // ends up holding the prompt and each returned token that was fed back to get the next one: all of them
  // when a stop token ended the run, all but the last when max_tokens did.
  std::vector<int32_t> generate_greedy(Sequence& seq, std::span<const int32_t> prompt, uint32_t max_tokens,
                                       std::span<const int32_t> stop) const;

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm;
    std::vector<float> ffn_norm, w_gate, w_up, w_down;
  };
  // The final hidden state of `token` at position seq.length() (before the output norm); appends K/V.
  // trace may be null.
  std::vector<float> hidden(Sequence& seq, int32_t token, Trace* trace) const;
  std::vector<float> logits(std::span<const float> hidden_state, Trace* trace) const;

  ModelConfig config_;
  std::vector<float> token_embd_;
  std::vector<float> output_norm_;
  std::vector<float> output_;      // empty when tied: logits use token_embd_
  std::vector<float> rope_freqs_;  // empty when the model has none
  std::vector<Layer> layers_;
  bool f16_kv_ = false;
};

}  // namespace kvtrie::reference
