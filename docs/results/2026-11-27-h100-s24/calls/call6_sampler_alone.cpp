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
  std::vector<int32_t> recent(200);
  for (auto& t : recent) t = g() % 128256;
  for (float temp : {0.0f, 0.8f}) {
    kvtrie::SamplingParams p;
    p.temperature = temp;
    p.seed = 1;
    kvtrie::Sampler s(p);
    int sink = 0;
    for (int i = 0; i < 50; ++i) sink += s.sample(logits, recent);
    auto t0 = std::chrono::steady_clock::now();
    const int N = 2000;
    for (int i = 0; i < N; ++i) sink += s.sample(logits, recent);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / N;
    std::printf("temperature %.1f: %.1f us per sample (%d)\n", temp, us, sink % 7);
  }
}
