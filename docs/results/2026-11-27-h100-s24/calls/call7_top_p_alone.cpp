#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "runner/sampler.h"
int main() {
  std::vector<float> logits(128256);
  std::mt19937 g(1);
  std::normal_distribution<float> n(0, 3);
  for (auto& x : logits) x = n(g);
  kvtrie::SamplingParams p;
  p.top_k = 0;
  p.seed = 1;
  kvtrie::Sampler s(p);
  int sink = 0;
  for (int i = 0; i < 10; ++i) sink += s.sample(logits, {});
  auto t0 = std::chrono::steady_clock::now();
  const int N = 200;
  for (int i = 0; i < N; ++i) sink += s.sample(logits, {});
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / N;
  std::printf("top_p without top_k: %.1f us per sample (%d)\n", us, sink % 7);
}
