// Contract: writes llama-family GGUF models (llama, qwen2, qwen3) with deterministic pseudo-random weights
// of any shape and any supported tensor type, with a tokenizer copied from a vocab GGUF or a built-in
// byte-level SentencePiece-style one. Tests make tiny models with it; benchmarks use real shapes. Free
// functions, safe from any thread (each call owns its state; it may start its own worker threads). The
// same options and seed always give the same bytes, whatever the thread count.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/tensor_type.h"
#include "runner/model/gguf_writer.h"

namespace kvtrie::synth {

struct ModelShape {
  std::string arch = "llama";  // general.architecture: llama, qwen2 or qwen3
  std::string name = "synthetic";
  uint32_t n_layers = 2;
  uint32_t n_embd = 64;
  uint32_t n_heads = 4;
  uint32_t n_kv_heads = 2;
  uint32_t head_dim = 0;  // 0: n_embd / n_heads; written as attention.key_length and value_length
  uint32_t n_ff = 192;
  uint32_t n_vocab = 320;  // ignored with SynthOptions::vocab_from (the vocab file decides)
  uint32_t n_ctx = 256;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;  // no output.weight
  bool qkv_bias = false;     // blk.N.attn_{q,k,v}.bias (qwen2)
  bool qk_norm = false;      // blk.N.attn_{q,k}_norm.weight (qwen3)
  bool llama3_rope_freqs =
      false;  // rope_freqs.weight with llama3 scaling factors (factor 32, original ctx 8192)

  uint32_t head_dim_or_default() const { return head_dim ? head_dim : n_embd / n_heads; }
};

// Presets: tiny, tiny-qwen2, tiny-qwen3 (2 layers, GQA 4/2 heads, vocab 320, ctx 256; width 64 and ff 192, or
// width 256 and ff 512 when `type` is a K-quant so that every row is whole blocks), llama3-1b, llama3-8b,
// qwen2-0.5b, qwen3-0.6b (the real shapes). nullopt for an unknown name.
std::optional<ModelShape> preset(std::string_view name, TensorType type);
const std::vector<std::string>& preset_names();

struct SynthOptions {
  ModelShape shape;
  TensorType type = TensorType::F32;  // the matrices and token_embd; norms, biases and rope factors stay F32
  uint64_t seed = 1;
  std::optional<std::filesystem::path> vocab_from;  // copy every tokenizer.* key from this GGUF
  std::optional<std::string> chat_template;         // written as tokenizer.chat_template (a Jinja source)
  unsigned threads = 0;                             // 0: hardware concurrency
  bool skeleton =
      false;  // leave every tensor as zeros in a sparse file: checks shapes without writing gigabytes
};

// The type a matrix whose rows hold `row_length` values gets: `requested` when rows are whole blocks, else
// the nearest 32-block type (Q4_K->Q4_0, Q5_K->Q5_0, Q6_K->Q8_0), else F16 (e.g. qwen2-0.5b's 896-wide rows
// with a K-quant).
TensorType matrix_type(TensorType requested, uint64_t row_length);

// Every metadata entry and tensor (without data) the model will have. Throws InputError when vocab_from is
// unusable, Error when the shape is inconsistent.
GgufWriter make_writer(const SynthOptions& options);

// Writes the model to `out` (atomically: a failed write leaves no file). Throws like make_writer, and Error
// on I/O failure.
void write_model(const std::filesystem::path& out, const SynthOptions& options);

// Convenience for tests: writes preset `name` with `type` and `seed` to `out` and returns `out`. Throws
// Error for an unknown preset.
std::filesystem::path write_preset(const std::filesystem::path& out, std::string_view name,
                                   TensorType type = TensorType::F32, uint64_t seed = 1);

// The built-in vocabulary size floor: <unk>, <s>, </s>, 256 byte tokens and the word-boundary piece.
inline constexpr uint32_t kByteVocabSize = 3 + 256 + 1;

}  // namespace kvtrie::synth
