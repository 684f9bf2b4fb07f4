// The CPU reference on tiny synthetic llama / qwen2 / qwen3 models (bench/synthetic): every architecture
// feature must run without NaN and must actually act on the logits. Each feature test edits one thing in a
// copy of the model file (zeroed biases, scaled weights, a removed tensor) and checks the logits move -- or,
// for edits that should be invisible, that they do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/synthetic/synthetic_model.h"
#include "runner/model/gguf_file.h"
#include "runner/model/gguf_writer.h"
#include "runner/reference/reference_model.h"
#include "runner/reference/reference_ops.h"
#include "tests/support/paths.h"

namespace kvtrie::reference {
namespace {

namespace fs = std::filesystem;

const std::vector<int32_t> kTokens{1, 72, 101, 108, 108, 111, 44, 32, 119, 300, 5};

// Logits of every token of kTokens, fed one by one.
std::vector<float> run(const fs::path& path, std::span<const int32_t> tokens = kTokens) {
  const GgufFile file = GgufFile::open(path);
  const ReferenceModel model(file);
  ReferenceModel::Sequence seq = model.new_sequence();
  return model.forward_all(seq, tokens);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

float max_abs(const std::vector<float>& a) {
  float m = 0;
  for (float v : a) m = std::max(m, std::abs(v));
  return m;
}

fs::path write(const std::string& file_name, const synth::ModelShape& shape,
               TensorType type = TensorType::F32) {
  synth::SynthOptions o;
  o.shape = shape;
  o.type = type;
  o.seed = 7;
  o.threads = 1;
  const fs::path out = test::scratch_dir() / file_name;
  synth::write_model(out, o);
  return out;
}

synth::ModelShape shape_of(const char* preset) {
  std::optional<synth::ModelShape> s = synth::preset(preset, TensorType::F32);
  EXPECT_TRUE(s.has_value()) << preset;
  return s.value_or(synth::ModelShape{});
}

// Copies a GGUF file, letting `edit_tensor` change a tensor's float values (F32 tensors only) or drop it
// (return false), and `edit_meta` change the metadata.
using TensorEdit = std::function<bool(const std::string& name, std::vector<float>& values)>;
fs::path rewrite(const fs::path& src, const std::string& file_name, const TensorEdit& edit_tensor,
                 const std::function<void(GgufWriter&)>& edit_meta = {}) {
  const GgufFile file = GgufFile::open(src);
  GgufWriter w;
  for (const auto& [key, entry] : file.metadata())
    if (key != "general.alignment") w.set(key, entry);
  w.set_alignment(static_cast<uint32_t>(file.alignment()));
  if (edit_meta) edit_meta(w);
  for (const GgufTensor& t : file.tensors()) {
    std::vector<uint8_t> bytes(t.data.begin(), t.data.end());
    if (t.type == TensorType::F32) {
      std::vector<float> values(bytes.size() / sizeof(float));
      std::memcpy(values.data(), bytes.data(), bytes.size());
      if (!edit_tensor(t.name, values)) continue;
      std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    w.add_tensor(t.name, t.type, t.shape, std::move(bytes));
  }
  const fs::path out = test::scratch_dir() / file_name;
  w.write(out);
  return out;
}

bool is_attn(const std::string& name, const char* what) {
  return name.starts_with("blk.") && name.find(what) != std::string::npos;
}

TEST(ReferenceSynthetic, EveryPresetAndTypeRunsWithoutNan) {
  for (const char* preset : {"tiny", "tiny-qwen2", "tiny-qwen3"}) {
    for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                            TensorType::Q4_0, TensorType::Q5_1, TensorType::Q4_K, TensorType::Q6_K}) {
      SCOPED_TRACE(std::string(preset) + " " + std::string(tensor_type_info(type).name));
      const fs::path path = test::scratch_dir() / "model.gguf";
      synth::write_preset(path, preset, type, 3);
      const std::vector<float> logits = run(path);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v));
      EXPECT_GT(max_abs(logits), 0.0f);
    }
  }
}

TEST(ReferenceSynthetic, ArchitecturesSetTheirFeatures) {
  struct Case {
    const char* preset;
    Architecture arch;
    RopeType rope;
    bool bias, qk_norm;
  };
  for (const Case& c : {Case{"tiny", Architecture::Llama, RopeType::Normal, false, false},
                        Case{"tiny-qwen2", Architecture::Qwen2, RopeType::Neox, true, false},
                        Case{"tiny-qwen3", Architecture::Qwen3, RopeType::Neox, false, true}}) {
    const fs::path path = synth::write_preset(test::scratch_dir() / "m.gguf", c.preset);
    const GgufFile file = GgufFile::open(path);
    const ReferenceModel model(file);
    EXPECT_EQ(model.config().arch, c.arch) << c.preset;
    EXPECT_EQ(model.config().rope_type, c.rope) << c.preset;
    EXPECT_EQ(model.config().has_qkv_bias, c.bias) << c.preset;
    EXPECT_EQ(model.config().has_qk_norm, c.qk_norm) << c.preset;
  }
}

TEST(ReferenceSynthetic, QuantizedWeightsGiveLogitsCloseToF32) {
  // Same seed, same float weights before quantization: Q8_0 must track F32 closely (a broken dequantize
  // path in the reference would not).
  synth::ModelShape shape = shape_of("tiny");
  const std::vector<float> f32 = run(write("f32.gguf", shape));
  const std::vector<float> q8 = run(write("q8.gguf", shape, TensorType::Q8_0));
  EXPECT_LT(max_abs_diff(f32, q8), 0.02f * max_abs(f32));
  EXPECT_GT(max_abs_diff(f32, q8), 0.0f);
}

TEST(ReferenceSynthetic, QkvBiasChangesTheLogits) {
  const fs::path base = write("qwen2.gguf", shape_of("tiny-qwen2"));
  const fs::path unbiased =
      rewrite(base, "qwen2-nobias.gguf", [](const std::string& name, std::vector<float>& v) {
        if (name.ends_with(".bias")) std::fill(v.begin(), v.end(), 0.0f);
        return true;
      });
  EXPECT_GT(max_abs_diff(run(base), run(unbiased)), 1e-4f);
}

TEST(ReferenceSynthetic, EachOfTheQkvBiasesActs) {
  const fs::path base = write("qwen2.gguf", shape_of("tiny-qwen2"));
  const std::vector<float> want = run(base);
  // The value bias flows straight to the output; q and k biases act through the attention weights.
  for (const char* which : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
    const fs::path edited = rewrite(base, "edited.gguf", [&](const std::string& name, std::vector<float>& v) {
      if (name.ends_with(which)) std::fill(v.begin(), v.end(), 0.5f);
      return true;
    });
    EXPECT_GT(max_abs_diff(want, run(edited)), 1e-4f) << which;
  }
}

TEST(ReferenceSynthetic, QkNormMakesAttentionIndependentOfTheScaleOfWqAndWk) {
  // With qwen3's per-head RMSNorm of q and k, scaling Wq and Wk changes nothing (up to eps: ~1e-5 here);
  // without it (llama) the same edit changes the attention scores (~0.3 here).
  auto scale_qk = [](const std::string& name, std::vector<float>& v) {
    if (is_attn(name, "attn_q.weight") || is_attn(name, "attn_k.weight"))
      for (float& x : v) x *= 8.0f;
    return true;
  };
  const fs::path qwen3 = write("qwen3.gguf", shape_of("tiny-qwen3"));
  const std::vector<float> qwen3_logits = run(qwen3);
  EXPECT_LT(max_abs_diff(qwen3_logits, run(rewrite(qwen3, "qwen3-scaled.gguf", scale_qk))), 1e-4f);

  const fs::path llama = write("llama.gguf", shape_of("tiny"));
  EXPECT_GT(max_abs_diff(run(llama), run(rewrite(llama, "llama-scaled.gguf", scale_qk))), 1e-4f);

  // And the norms' own weights act.
  const fs::path renormed =
      rewrite(qwen3, "qwen3-norm.gguf", [](const std::string& name, std::vector<float>& v) {
        if (is_attn(name, "attn_q_norm") || is_attn(name, "attn_k_norm"))
          for (float& x : v) x *= 8.0f;
        return true;
      });
  EXPECT_GT(max_abs_diff(qwen3_logits, run(renormed)), 1e-4f);
}

TEST(ReferenceSynthetic, RopeFrequencyFactorsChangeTheLogits) {
  synth::ModelShape shape = shape_of("tiny");
  shape.llama3_rope_freqs = true;
  const fs::path with = write("freqs.gguf", shape);
  const fs::path without = rewrite(with, "nofreqs.gguf", [](const std::string& name, std::vector<float>&) {
    return name != "rope_freqs.weight";
  });
  const fs::path ones = rewrite(with, "ones.gguf", [](const std::string& name, std::vector<float>& v) {
    if (name == "rope_freqs.weight") std::fill(v.begin(), v.end(), 1.0f);
    return true;
  });
  // The llama3 factors only slow the lowest frequencies, whose angles stay tiny over a few positions: the
  // effect is small but the computation is deterministic, so any difference is the factors acting.
  const std::vector<float> without_logits = run(without);
  EXPECT_NE(run(with), without_logits);
  EXPECT_EQ(run(ones), without_logits);  // factors of 1 are the same as no factors
  // Factors below 1 speed every pair up: a large effect.
  const fs::path fast = rewrite(with, "fast.gguf", [](const std::string& name, std::vector<float>& v) {
    if (name == "rope_freqs.weight") std::fill(v.begin(), v.end(), 0.1f);
    return true;
  });
  EXPECT_GT(max_abs_diff(without_logits, run(fast)), 1e-3f);
}

TEST(ReferenceSynthetic, TiedOutputUsesTheTokenEmbedding) {
  const fs::path untied = write("untied.gguf", shape_of("tiny"));
  std::vector<float> embd;
  {
    const GgufFile f = GgufFile::open(untied);
    embd = dequantize_tensor(*f.find_tensor("token_embd.weight"));
  }
  const fs::path tied = rewrite(untied, "tied.gguf", [](const std::string& name, std::vector<float>&) {
    return name != "output.weight";
  });
  const fs::path copied = rewrite(untied, "copied.gguf", [&](const std::string& name, std::vector<float>& v) {
    if (name == "output.weight") v = embd;
    return true;
  });
  EXPECT_EQ(run(tied), run(copied));
  EXPECT_GT(max_abs_diff(run(tied), run(untied)), 1e-4f);
  const GgufFile file = GgufFile::open(tied);
  EXPECT_TRUE(ReferenceModel(file).config().tied_output);
}

TEST(ReferenceSynthetic, NeoxRopeEqualsNormalRopeOnPermutedWeights) {
  // Neox rotates dims (i, i + d/2); Normal rotates (2i, 2i+1). Relabelling a qwen2 model as llama (the
  // biases stay) while moving q/k row i to 2i and row i + d/2 to 2i+1 in every head must give the same
  // logits: q.k is unchanged by permuting both. Any mistake in either rope type breaks this.
  const fs::path qwen2 = write("qwen2.gguf", shape_of("tiny-qwen2"));
  const GgufFile src = GgufFile::open(qwen2);
  const ModelConfig c = ModelConfig::from_gguf(src);
  ASSERT_EQ(c.rope_dims, c.head_dim_k);
  const size_t d = c.head_dim_k, half = d / 2, cols = c.n_embd;
  auto permute_rows = [&](std::vector<float>& v, size_t row_len) {
    const std::vector<float> old = v;
    for (size_t head = 0; head < v.size() / row_len / d; ++head)
      for (size_t i = 0; i < half; ++i)
        for (size_t j = 0; j < row_len; ++j) {
          v[(head * d + 2 * i) * row_len + j] = old[(head * d + i) * row_len + j];
          v[(head * d + 2 * i + 1) * row_len + j] = old[(head * d + i + half) * row_len + j];
        }
  };
  const fs::path llama = rewrite(
      qwen2, "as-llama.gguf",
      [&](const std::string& name, std::vector<float>& v) {
        if (is_attn(name, "attn_q.weight") || is_attn(name, "attn_k.weight")) permute_rows(v, cols);
        if (is_attn(name, "attn_q.bias") || is_attn(name, "attn_k.bias")) permute_rows(v, 1);
        return true;
      },
      [&](GgufWriter& w) {
        w.set_string("general.architecture", "llama");
        for (const auto& [key, entry] : src.metadata())
          if (key.starts_with("qwen2.")) w.set("llama." + key.substr(6), entry);
      });
  const GgufFile relabelled = GgufFile::open(llama);
  ASSERT_EQ(ReferenceModel(relabelled).config().rope_type, RopeType::Normal);
  const std::vector<float> want = run(qwen2);
  const std::vector<float> got = run(llama);
  EXPECT_LT(max_abs_diff(want, got), 1e-5f * max_abs(want) + 1e-6f);

  // Without the permutation, the relabelled model differs: the rope type matters.
  const fs::path unpermuted = rewrite(
      qwen2, "as-llama-raw.gguf", [](const std::string&, std::vector<float>&) { return true; },
      [&](GgufWriter& w) {
        w.set_string("general.architecture", "llama");
        for (const auto& [key, entry] : src.metadata())
          if (key.starts_with("qwen2.")) w.set("llama." + key.substr(6), entry);
      });
  EXPECT_GT(max_abs_diff(want, run(unpermuted)), 1e-4f);
}

TEST(ReferenceSynthetic, HeadDimFromKeyLengthMayDifferFromWidthOverHeads) {
  synth::ModelShape shape = shape_of("tiny-qwen3");
  shape.head_dim = 2 * shape.n_embd / shape.n_heads;  // qwen3-style: q is wider than the model
  const fs::path path = write("wide-heads.gguf", shape);
  const GgufFile file = GgufFile::open(path);
  const ReferenceModel model(file);
  EXPECT_EQ(model.config().head_dim_k, shape.head_dim);
  ReferenceModel::Sequence seq = model.new_sequence();
  const std::vector<float> logits = model.forward_all(seq, kTokens);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(seq.keys(0).size(), kTokens.size() * model.config().n_kv_heads * shape.head_dim);
}

TEST(ReferenceSynthetic, SequenceHoldsRopedKeysAndValuesInTheDocumentedLayout) {
  // Layer 0 of a qwen2 model, rebuilt from the ops: K = rope(Wk h + bk, pos), V = Wv h + bv with
  // h = rms_norm(embedding, attn_norm); stored [pos][kv_head][head_dim]. The GPU KV cache is checked
  // against exactly these values.
  const fs::path path = write("qwen2.gguf", shape_of("tiny-qwen2"));
  const GgufFile file = GgufFile::open(path);
  const ReferenceModel model(file);
  const ModelConfig& c = model.config();
  ReferenceModel::Sequence seq = model.new_sequence();
  const std::vector<int32_t> tokens{17, 250};
  model.forward_batch(seq, tokens);

  auto tensor = [&](const std::string& name) { return dequantize_tensor(*file.find_tensor(name)); };
  const std::vector<float> wk = tensor("blk.0.attn_k.weight"), bk = tensor("blk.0.attn_k.bias");
  const std::vector<float> wv = tensor("blk.0.attn_v.weight"), bv = tensor("blk.0.attn_v.bias");
  const std::vector<float> norm = tensor("blk.0.attn_norm.weight");
  const size_t kv_k = static_cast<size_t>(c.n_kv_heads) * c.head_dim_k;
  const size_t kv_v = static_cast<size_t>(c.n_kv_heads) * c.head_dim_v;
  ASSERT_EQ(seq.keys(0).size(), tokens.size() * kv_k);
  ASSERT_EQ(seq.values(0).size(), tokens.size() * kv_v);
  for (uint32_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<float> h = dequantize_tensor_row(*file.find_tensor("token_embd.weight"), tokens[pos]);
    rms_norm(h, norm, c.rms_eps, h);
    std::vector<float> k(kv_k), v(kv_v);
    matvec(wk, h, k);
    add(k, bk);
    rope_heads(k, c.head_dim_k, pos, c.rope_dims, c.rope_freq_base, RopeType::Neox);
    matvec(wv, h, v);
    add(v, bv);
    for (size_t i = 0; i < kv_k; ++i) EXPECT_FLOAT_EQ(seq.keys(0)[pos * kv_k + i], k[i]) << pos << " " << i;
    for (size_t i = 0; i < kv_v; ++i) EXPECT_FLOAT_EQ(seq.values(0)[pos * kv_v + i], v[i]) << pos << " " << i;
  }
}

TEST(ReferenceSynthetic, TraceRecordsEveryIntermediateOfTheForwardPass) {
  const fs::path path = write("qwen3.gguf", shape_of("tiny-qwen3"));
  const GgufFile file = GgufFile::open(path);
  const ReferenceModel model(file);
  const ModelConfig& c = model.config();
  ReferenceModel::Sequence seq = model.new_sequence();
  model.forward_batch(seq, std::vector<int32_t>{1, 40, 41});
  ReferenceModel::Sequence plain = seq;
  const int32_t token = 99;
  ReferenceModel::Trace trace;
  const std::vector<float> logits = model.forward(seq, token, trace);
  EXPECT_EQ(logits, model.forward(plain, token));  // tracing changes nothing

  auto tensor = [&](const std::string& name) { return dequantize_tensor(*file.find_tensor(name)); };
  EXPECT_EQ(trace.embedding, dequantize_tensor_row(*file.find_tensor("token_embd.weight"), token));
  ASSERT_EQ(trace.layers.size(), c.n_layers);
  std::vector<float> x = trace.embedding;
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const ReferenceModel::LayerTrace& t = trace.layers[l];
    const std::string blk = "blk." + std::to_string(l) + ".";
    std::vector<float> want(x.size());
    rms_norm(x, tensor(blk + "attn_norm.weight"), c.rms_eps, want);
    EXPECT_EQ(t.attn_in, want);
    const size_t kv_k = static_cast<size_t>(c.n_kv_heads) * c.head_dim_k;
    const size_t kv_v = static_cast<size_t>(c.n_kv_heads) * c.head_dim_v;
    EXPECT_TRUE(std::ranges::equal(t.k, seq.keys(l).subspan(3 * kv_k, kv_k)));
    EXPECT_TRUE(std::ranges::equal(t.v, seq.values(l).subspan(3 * kv_v, kv_v)));
    matvec(tensor(blk + "attn_output.weight"), t.attn_out, want);
    add(want, x);
    EXPECT_EQ(t.x_after_attn, want);
    std::vector<float> normed(x.size());
    rms_norm(t.x_after_attn, tensor(blk + "ffn_norm.weight"), c.rms_eps, normed);
    EXPECT_EQ(t.ffn_in, normed);
    ASSERT_EQ(t.ffn_act.size(), c.n_ff);
    matvec(tensor(blk + "ffn_down.weight"), t.ffn_act, want);
    add(want, t.x_after_attn);
    EXPECT_EQ(t.x_after_ffn, want);
    x = t.x_after_ffn;
  }
  std::vector<float> normed(x.size());
  rms_norm(x, tensor("output_norm.weight"), c.rms_eps, normed);
  EXPECT_EQ(trace.final_norm, normed);
  std::vector<float> want_logits(c.n_vocab);
  matvec(tensor(c.tied_output ? "token_embd.weight" : "output.weight"), trace.final_norm, want_logits);
  EXPECT_EQ(logits, want_logits);
}

TEST(ReferenceSynthetic, ThreadsMayShareOneModelWithTheirOwnSequences) {
  // The contract the reference engine relies on: const methods run concurrently, each on its own Sequence.
  const fs::path path = write("llama.gguf", shape_of("tiny"));
  const GgufFile file = GgufFile::open(path);
  const ReferenceModel model(file);
  auto generate = [&](int32_t first) {
    ReferenceModel::Sequence seq = model.new_sequence();
    return model.generate_greedy(seq, std::vector<int32_t>{1, first}, 24, std::vector<int32_t>{});
  };
  std::vector<std::vector<int32_t>> serial, parallel(4);
  for (int32_t i = 0; i < 4; ++i) serial.push_back(generate(60 + i));
  std::vector<std::thread> threads;
  for (int32_t i = 0; i < 4; ++i) threads.emplace_back([&, i] { parallel[i] = generate(60 + i); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(parallel, serial);
  EXPECT_EQ(serial[0].size(), 24u);
}

TEST(ReferenceSynthetic, BatchForkAndTokenByTokenAgree) {
  const fs::path path = write("qwen3.gguf", shape_of("tiny-qwen3"));
  const GgufFile file = GgufFile::open(path);
  const ReferenceModel model(file);
  ReferenceModel::Sequence one = model.new_sequence();
  std::vector<float> last;
  for (int32_t t : kTokens) last = model.forward(one, t);
  ReferenceModel::Sequence batch = model.new_sequence();
  EXPECT_EQ(model.forward_batch(batch, kTokens), last);

  // A fork continues like the original, and like the token-by-token sequence.
  ReferenceModel::Sequence fork = batch;
  const std::vector<float> fork_logits = model.forward(fork, 42);
  EXPECT_EQ(fork_logits, model.forward(batch, 42));
  EXPECT_EQ(fork_logits, model.forward(one, 42));
  EXPECT_EQ(model.forward(fork, 43), model.forward(batch, 43));
}

}  // namespace
}  // namespace kvtrie::reference
