#include "bench/synthetic/synthetic_model.h"

#include <cmath>
#include <numbers>

#include "base/error.h"
#include "runner/model/gguf_file.h"
#include "runner/model/quantization.h"

namespace kvtrie::synth {

namespace {

bool is_k_quant(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K;
}

ModelShape tiny(TensorType type) {
  ModelShape s;
  s.name = "tiny";
  if (is_k_quant(type)) {
    s.n_embd = 256;
    s.n_ff = 512;
  }
  return s;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Roughly standard normal: the sum of four 16-bit uniforms (Irwin-Hall), scaled to unit variance. Cheap
// enough to generate billions of weights in seconds; the tails are bounded at about 3.5 sigma.
float next_normal(uint64_t& state) {
  const uint64_t r = splitmix64(state);
  const auto sum =
      static_cast<int32_t>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  return static_cast<float>(sum - 131070) * (1.0f / 37837.23f);
}

// Each tensor's stream depends only on the seed and its name, so tensors can be generated in any order.
uint64_t tensor_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  uint64_t s = seed;
  return splitmix64(s) ^ h;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Llama 3 rope frequency factors (scale factor 32, low/high frequency factors 1 and 4, original context
// 8192): long wavelengths are slowed by the factor, short ones kept, and the band between interpolated.
std::vector<float> llama3_rope_factors(uint32_t rope_dims, float freq_base) {
  constexpr double factor = 32, low = 1, high = 4, original_ctx = 8192;
  const double low_wavelen = original_ctx / low, high_wavelen = original_ctx / high;
  std::vector<float> out;
  for (uint32_t i = 0; i < rope_dims / 2; ++i) {
    const double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / rope_dims);
    const double wavelen = 2 * std::numbers::pi / freq;
    double f = 1;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (original_ctx / wavelen - low) / (high - low);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

void add_builtin_vocab(GgufWriter& w, uint32_t n_vocab) {
  KVTRIE_CHECK(n_vocab >= kByteVocabSize, "the built-in vocabulary needs at least 260 tokens");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int64_t> types = {2, 3, 3};  // UNKNOWN, CONTROL, CONTROL
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(6);  // BYTE
  }
  // The word-boundary piece: without it SentencePiece would byte-encode U+2581 and decoding could not turn
  // it back into a space.
  tokens.push_back("\xE2\x96\x81");
  types.push_back(1);  // NORMAL
  for (uint32_t i = 0; tokens.size() < n_vocab; ++i) {
    tokens.push_back("<unused_" + std::to_string(i) + ">");
    types.push_back(5);  // UNUSED
  }
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  w.set_f32_array("tokenizer.ggml.scores", std::vector<double>(n_vocab, 0.0));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

uint32_t copy_vocab(GgufWriter& w, const std::filesystem::path& path) {
  const GgufFile vocab = GgufFile::open(path);
  const std::vector<std::string>* tokens = vocab.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty())
    throw InputError(path.string() + ": no tokenizer.ggml.tokens (not a vocab file?)");
  for (const auto& [key, entry] : vocab.metadata())
    if (key.starts_with("tokenizer.")) w.set(key, entry);
  return static_cast<uint32_t>(tokens->size());
}

void check_shape(const ModelShape& s) {
  KVTRIE_CHECK(s.arch == "llama" || s.arch == "qwen2" || s.arch == "qwen3", "unknown architecture " + s.arch);
  KVTRIE_CHECK(
      s.n_layers > 0 && s.n_embd > 0 && s.n_heads > 0 && s.n_kv_heads > 0 && s.n_ff > 0 && s.n_ctx > 0,
      "every dimension must be positive");
  KVTRIE_CHECK(s.n_heads % s.n_kv_heads == 0, "n_heads must be a multiple of n_kv_heads");
  KVTRIE_CHECK(s.head_dim_or_default() > 0 && s.head_dim_or_default() % 2 == 0, "head_dim must be even");
}

}  // namespace

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = {"tiny",      "tiny-qwen2", "tiny-qwen3", "llama3-1b",
                                                 "llama3-8b", "qwen2-0.5b", "qwen3-0.6b"};
  return names;
}

std::optional<ModelShape> preset(std::string_view name, TensorType type) {
  ModelShape s;
  if (name == "tiny") {
    s = tiny(type);
  } else if (name == "tiny-qwen2") {
    s = tiny(type);
    s.arch = "qwen2";
    s.tied_output = true;
    s.qkv_bias = true;
    s.rope_freq_base = 1e6f;
    s.rms_eps = 1e-6f;
  } else if (name == "tiny-qwen3") {
    s = tiny(type);
    s.arch = "qwen3";
    s.head_dim = is_k_quant(type) ? 128 : 32;  // != n_embd / n_heads, as in real qwen3
    s.tied_output = true;
    s.qk_norm = true;
    s.rope_freq_base = 1e6f;
    s.rms_eps = 1e-6f;
  } else if (name == "llama3-1b") {
    s = {"llama", "", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 500000.0f, 1e-5f, true, false, false, true};
  } else if (name == "llama3-8b") {
    s = {"llama", "",   32,        4096,  32,    8,     128,   14336,
         128256,  8192, 500000.0f, 1e-5f, false, false, false, false};
  } else if (name == "qwen2-0.5b") {
    s = {"qwen2", "", 24, 896, 14, 2, 64, 4864, 151936, 32768, 1e6f, 1e-6f, true, true, false, false};
  } else if (name == "qwen3-0.6b") {
    s = {"qwen3", "", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1e6f, 1e-6f, true, false, true, false};
  } else {
    return std::nullopt;
  }
  s.name = std::string(name);
  return s;
}

TensorType matrix_type(TensorType requested, uint64_t row_length) {
  if (row_length % tensor_type_info(requested).block_elements == 0) return requested;
  TensorType fallback = TensorType::F16;
  if (requested == TensorType::Q4_K) fallback = TensorType::Q4_0;
  if (requested == TensorType::Q5_K) fallback = TensorType::Q5_0;
  if (requested == TensorType::Q6_K) fallback = TensorType::Q8_0;
  return row_length % tensor_type_info(fallback).block_elements == 0 ? fallback : TensorType::F16;
}

GgufWriter make_writer(const SynthOptions& o) {
  ModelShape s = o.shape;
  check_shape(s);
  GgufWriter w;
  const std::string& a = s.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "kvtrie-synth " + s.name);
  w.set_u32("general.alignment", 32);
  w.set_u32("general.quantization_version", 2);
  if (o.vocab_from) {
    s.n_vocab = copy_vocab(w, *o.vocab_from);
  } else {
    add_builtin_vocab(w, s.n_vocab);
  }
  if (o.chat_template) w.set_string("tokenizer.chat_template", *o.chat_template);
  const uint32_t hd = s.head_dim_or_default();
  w.set_u32(a + ".block_count", s.n_layers);
  w.set_u32(a + ".context_length", s.n_ctx);
  w.set_u32(a + ".embedding_length", s.n_embd);
  w.set_u32(a + ".feed_forward_length", s.n_ff);
  w.set_u32(a + ".attention.head_count", s.n_heads);
  w.set_u32(a + ".attention.head_count_kv", s.n_kv_heads);
  w.set_u32(a + ".attention.key_length", hd);
  w.set_u32(a + ".attention.value_length", hd);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(a + ".rope.freq_base", s.rope_freq_base);
  w.set_u32(a + ".rope.dimension_count", hd);
  w.set_u32(a + ".vocab_size", s.n_vocab);

  const uint64_t embd = s.n_embd, q = uint64_t{s.n_heads} * hd, kv = uint64_t{s.n_kv_heads} * hd;
  auto matrix = [&](const std::string& name, uint64_t in, uint64_t out) {
    w.add_tensor(name, matrix_type(o.type, in), {in, out});
  };
  auto vec = [&](const std::string& name, uint64_t n) { w.add_tensor(name, TensorType::F32, {n}); };
  matrix("token_embd.weight", embd, s.n_vocab);
  if (s.llama3_rope_freqs) vec("rope_freqs.weight", hd / 2);
  for (uint32_t i = 0; i < s.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    vec(b + "attn_norm.weight", embd);
    matrix(b + "attn_q.weight", embd, q);
    matrix(b + "attn_k.weight", embd, kv);
    matrix(b + "attn_v.weight", embd, kv);
    if (s.qkv_bias) {
      vec(b + "attn_q.bias", q);
      vec(b + "attn_k.bias", kv);
      vec(b + "attn_v.bias", kv);
    }
    if (s.qk_norm) {
      vec(b + "attn_q_norm.weight", hd);
      vec(b + "attn_k_norm.weight", hd);
    }
    matrix(b + "attn_output.weight", q, embd);
    vec(b + "ffn_norm.weight", embd);
    matrix(b + "ffn_gate.weight", embd, s.n_ff);
    matrix(b + "ffn_up.weight", embd, s.n_ff);
    matrix(b + "ffn_down.weight", s.n_ff, embd);
  }
  vec("output_norm.weight", embd);
  if (!s.tied_output) matrix("output.weight", embd, s.n_vocab);
  return w;
}

void write_model(const std::filesystem::path& out, const SynthOptions& o) {
  const GgufWriter w = make_writer(o);
  if (o.skeleton) {
    w.write(out, {}, 1, /*sparse=*/true);
    return;
  }
  const uint32_t hd = o.shape.head_dim_or_default();
  auto fill = [&](size_t index, GgufTensorSink& sink) {
    const GgufWriter::Tensor& t = w.tensors()[index];
    uint64_t state = tensor_seed(o.seed, t.name);
    const uint64_t row = t.shape[0];
    const uint64_t rows = t.bytes / row_bytes(t.type, row);
    if (t.name == "rope_freqs.weight") {
      const std::vector<float> f = llama3_rope_factors(hd, o.shape.rope_freq_base);
      sink.write({reinterpret_cast<const uint8_t*>(f.data()), f.size() * sizeof(float)});
      return;
    }
    // Matrices and biases ~N(0, 0.02); norm weights ~1 plus the same small noise.
    const float scale = 0.02f, mean = ends_with(t.name, "norm.weight") ? 1.0f : 0.0f;
    // Chunks of about a million values keep memory small however large the tensor is.
    const uint64_t chunk_rows = std::max<uint64_t>(1, (uint64_t{1} << 20) / row);
    std::vector<float> values;
    std::vector<uint8_t> bytes;
    for (uint64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const uint64_t n_rows = std::min(chunk_rows, rows - r0);
      values.resize(n_rows * row);
      bytes.resize(n_rows * row_bytes(t.type, row));
      for (float& v : values) v = mean + scale * next_normal(state);
      for (uint64_t r = 0; r < n_rows; ++r)
        quantize_row(t.type, values.data() + r * row, bytes.data() + r * row_bytes(t.type, row), row);
      sink.write(bytes);
    }
  };
  w.write(out, fill, o.threads);
}

std::filesystem::path write_preset(const std::filesystem::path& out, std::string_view name, TensorType type,
                                   uint64_t seed) {
  const std::optional<ModelShape> shape = preset(name, type);
  KVTRIE_CHECK(shape.has_value(), "unknown synthetic preset '" + std::string(name) + "'");
  SynthOptions o;
  o.shape = *shape;
  o.type = type;
  o.seed = seed;
  write_model(out, o);
  return out;
}

}  // namespace kvtrie::synth
