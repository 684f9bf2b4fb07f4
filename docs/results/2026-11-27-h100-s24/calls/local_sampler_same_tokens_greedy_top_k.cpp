#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "runner/sampler.h"
int main() {
  std::mt19937 g(5);
  std::normal_distribution<float> n(0, 3);
  unsigned long long h = 1469598103934665603ull;
  for (int variant = 0; variant < 12; ++variant) {
    std::vector<float> logits(variant % 2 ? 128256 : 3000);
    for (auto& x : logits) x = std::round(n(g) * 8) / 8;  // ties
    for (int i = 0; i < 50; ++i) logits[g() % logits.size()] = std::nanf("");
    std::vector<int> recent(100);
    for (auto& t : recent) t = g() % logits.size();
    kvtrie::SamplingParams p;
    p.seed = variant;
    p.temperature = variant < 4 ? 0.0f : 0.8f;
    p.top_k = variant < 8 ? 40 : 5;
    p.repeat_penalty = variant % 3 ? 1.1f : 1.0f;
    p.frequency_penalty = variant % 5 == 0 ? 0.2f : 0.0f;
    kvtrie::Sampler s(p);
    for (int i = 0; i < 300; ++i) {
      int t = s.sample(logits, recent);
      h = (h ^ t) * 1099511628211ull;
      recent.push_back(t);
    }
  }
  std::printf("%llx\n", h);
}
