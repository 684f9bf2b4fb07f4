#include <cstdio>
#include <random>
#include <vector>

#include "runner/sampler.h"
int main() {
  std::mt19937 g(3);
  std::normal_distribution<float> n(0, 3);
  unsigned long long h = 1469598103934665603ull;
  for (int variant = 0; variant < 8; ++variant) {
    std::vector<float> logits(variant % 2 ? 128256 : 5000);
    for (auto& x : logits) x = n(g) * (variant < 4 ? 1.0f : 0.3f);
    kvtrie::SamplingParams p;
    p.top_k = 0;
    p.seed = variant;
    p.top_p = variant % 3 ? 0.95f : 0.5f;
    p.min_p = variant % 4 == 3 ? 0.0f : 0.05f;
    p.temperature = variant < 6 ? 0.8f : 1.5f;
    kvtrie::Sampler s(p);
    for (int i = 0; i < 200; ++i) {
      int t = s.sample(logits, {});
      h = (h ^ t) * 1099511628211ull;
    }
  }
  std::printf("%llx\n", h);
}
