// sample: Sampler::sample on one row of `vocab` logits (normal, sigma 3: a model's spread), for greedy, the
// defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05), the defaults with Ollama's repeat penalty
// (1.1 over the last 64 tokens), and top-p without top-k (the whole vocabulary sorted in part). CPU only:
// what the engine spends after every step, while the GPU waits for the next token.
#include <random>
#include <string>
#include <vector>

#include "bench/perf/benches.h"
#include "runner/sampler.h"

namespace kvtrie::bench {

void run_sample(const CommonOptions& common, const SampleOptions& options) {
  std::vector<float> logits(options.vocab);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& v : logits) v = normal(rng);
  std::vector<int32_t> recent(200);
  for (int32_t& t : recent) t = static_cast<int32_t>(rng() % options.vocab);

  struct Case {
    std::string name;
    SamplingParams params;
  };
  std::vector<Case> cases(4);
  cases[0].name = "greedy";
  cases[0].params.temperature = 0.0f;
  cases[1].name = "defaults";
  cases[2].name = "defaults_repeat_penalty";
  cases[2].params.repeat_penalty = 1.1f;
  cases[3].name = "top_p_without_top_k";
  cases[3].params.top_k = 0;
  for (Case& c : cases) {
    c.params.seed = 1;
    Sampler sampler(c.params);
    int32_t sink = 0;
    const double seconds = median_seconds(common, [&] {
      for (uint32_t i = 0; i < options.draws; ++i) sink ^= sampler.sample(logits, recent);
    });
    Row("sample")
        .text("params", c.name)
        .integer("vocab", options.vocab)
        .integer("draws", options.draws)
        .num("us", seconds / options.draws * 1e6)
        .integer("token_xor", sink)  // keeps the draws from being optimized away
        .emit();
  }
}

}  // namespace kvtrie::bench
