// kvtrie-synth: writes a synthetic GGUF model (see bench/synthetic/synthetic_model.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>

#include "bench/synthetic/synthetic_model.h"

int main(int argc, char** argv) {
  using namespace kvtrie;
  CLI::App app{"kvtrie-synth: write a llama-family GGUF model with deterministic pseudo-random weights"};
  std::string preset_name = "tiny", type_name = "F16", vocab_from, out;
  uint64_t seed = 1;
  uint32_t layers = 0, ctx = 0, vocab_size = 0;
  unsigned threads = 0;
  std::vector<std::string> type_names;
  for (const TensorTypeInfo& info : kTensorTypes) type_names.emplace_back(info.name);
  app.add_option("--preset", preset_name, "model shape")
      ->check(CLI::IsMember(synth::preset_names()))
      ->capture_default_str();
  app.add_option("--type", type_name, "type of the matrices and token_embd (norms stay F32)")
      ->check(CLI::IsMember(type_names))
      ->capture_default_str();
  app.add_option("--seed", seed, "weight seed")->capture_default_str();
  app.add_option("--vocab-from", vocab_from,
                 "copy every tokenizer.* key from this GGUF (sets the vocab size)")
      ->check(CLI::ExistingFile);
  app.add_option("--layers", layers, "override the number of layers")->check(CLI::PositiveNumber);
  app.add_option("--ctx", ctx, "override the training context length")->check(CLI::PositiveNumber);
  app.add_option("--vocab-size", vocab_size, "override the built-in vocabulary size (at least 260)")
      ->check(CLI::Range(synth::kByteVocabSize, 1u << 30))
      ->excludes("--vocab-from");
  app.add_option("--threads", threads, "worker threads (0: all cores)")->capture_default_str();
  app.add_option("-o,--output", out, "output .gguf path")->required();
  CLI11_PARSE(app, argc, argv);

  try {
    const TensorType type = *tensor_type_from_name(type_name);
    synth::SynthOptions options;
    options.shape = *synth::preset(preset_name, type);
    if (layers) options.shape.n_layers = layers;
    if (ctx) options.shape.n_ctx = ctx;
    if (vocab_size) options.shape.n_vocab = vocab_size;
    options.type = type;
    options.seed = seed;
    if (!vocab_from.empty()) options.vocab_from = vocab_from;
    options.threads = threads;
    const auto start = std::chrono::steady_clock::now();
    synth::write_model(out, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("wrote %s: preset %s, type %s, %.1f MB in %.2f s\n", out.c_str(), preset_name.c_str(),
                type_name.c_str(), static_cast<double>(std::filesystem::file_size(out)) / 1e6, seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtrie-synth: %s\n", e.what());
    return 1;
  }
  return 0;
}
