// The Vulkan engine end to end on lavapipe: the golden text through the GPU, and the prefix cache's
// correctness contract (SPEC.md section 4): tokens generated with a device-tier hit, a host-tier hit and a
// cold run agree exactly with --deterministic; a conversation computes only each turn's new tokens;
// concurrent requests sharing a system prompt hold and compute it once; a device budget smaller than the
// working set still serves every request through demotion and promotion.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "bench/synthetic/synthetic_model.h"
#include "kernels/vk/context.h"
#include "kernels/vk/instance.h"
#include "runner/engine/gpu_engine.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "runner/tokenizer/tokenizer.h"
#include "tests/support/paths.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::engine {
namespace {

struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string text;
  GenerationStats stats;
};

Result collect(GenerationStream& stream) {
  Result r;
  Chunk chunk;
  while (stream.next(chunk, std::chrono::seconds(120)) == StreamChannel::Poll::Chunk) {
    r.tokens.insert(r.tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
    for (const TokenLogprob& lp : chunk.logprobs) r.logprobs.push_back(lp.logprob);
    r.text += chunk.text;
    if (chunk.final) r.stats = *chunk.final;
  }
  return r;
}

Result run(Engine& engine, const GenerateRequest& request) {
  auto submitted = engine.submit(request);
  EXPECT_TRUE(std::holds_alternative<GenerationStream>(submitted)) << "the engine rejected the request";
  if (!std::holds_alternative<GenerationStream>(submitted)) return {};
  return collect(std::get<GenerationStream>(submitted));
}

GenerateRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.sampling.seed = 7;
  r.ignore_eos = true;
  return r;
}

std::vector<int32_t> pseudo_random_tokens(uint32_t count, uint32_t seed, uint32_t vocab) {
  std::vector<int32_t> out(count);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& t : out) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t = static_cast<int32_t>(3 + x % (vocab - 3));  // skip <unk>, <s>, </s>
  }
  return out;
}

// Bytes of one KV page: P tokens of every layer's K and V in f16.
uint64_t page_bytes_of(const GgufFile& file, uint32_t page_tokens) {
  const ModelConfig mc = ModelConfig::from_gguf(file);
  return uint64_t{mc.n_layers} * 2 * page_tokens * mc.n_kv_heads * mc.head_dim_k * 2;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every test fails on any validation message and on device memory left allocated (VulkanTest).
class GpuEngineTest : public test::VulkanTest {
 protected:
  void SetUp() override {
    VulkanTest::SetUp();
    model_path_ = synth::write_preset(test::scratch_dir() / "tiny.gguf", "tiny", TensorType::Q8_0, 3);
    file_.emplace(GgufFile::open(model_path_));
    tokenizer_ = Tokenizer::from_gguf(*file_);
  }
  void TearDown() override {
    engine_.reset();
    VulkanTest::TearDown();
  }
  GpuEngine& start(GpuEngineConfig config) {
    engine_.reset();
    engine_ = std::make_unique<GpuEngine>(context(), *file_, *tokenizer_, config);
    return *engine_;
  }
  static GpuEngineConfig deterministic() {
    GpuEngineConfig c;
    c.n_ctx = 256;
    c.parallel = 8;
    c.page_tokens = 16;
    c.max_batch_tokens = 64;
    c.deterministic = true;
    return c;
  }

  std::filesystem::path model_path_;
  std::optional<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<GpuEngine> engine_;
};

TEST_F(GpuEngineTest, StoriesGreedyThroughVulkanMatchesTheReferenceText) {
  KVTRIE_REQUIRE_SHARED("models/stories260K.gguf");
  const GgufFile file = GgufFile::open(test::shared_dir() / "models/stories260K.gguf");
  const auto tokenizer = Tokenizer::from_gguf(file);
  std::ifstream golden_file(test::shared_dir() / "models/stories260K.greedy.txt", std::ios::binary);
  std::stringstream golden;
  golden << golden_file.rdbuf();
  GpuEngineConfig config;
  config.parallel = 1;
  config.n_ctx = 512;
  GpuEngine engine(context(), file, *tokenizer, config);
  GenerateRequest request;
  request.prompt = tokenizer->encode("Once upon a time", true, false);
  request.max_tokens = 256;
  request.sampling.temperature = 0;
  const Result r = run(engine, request);
  EXPECT_EQ(r.stats.stop_kind, StopKind::Length);
  EXPECT_EQ("Once upon a time" + r.text, golden.str());
  engine.shutdown(std::chrono::milliseconds(0));
}

TEST_F(GpuEngineTest, DeviceHitGeneratesTheSameTokensAsAColdRun) {
  GpuEngine& engine = start(deterministic());
  const auto prompt = pseudo_random_tokens(70, 1, 320);
  const Result cold = run(engine, greedy(prompt, 24));
  EXPECT_EQ(cold.stats.cached_tokens, 0u);
  const Result hit = run(engine, greedy(prompt, 24));
  EXPECT_EQ(hit.stats.cached_tokens, prompt.size() - 1) << "all but the last prompt token come from the cache";
  EXPECT_EQ(hit.stats.cached_tokens_device, hit.stats.cached_tokens);
  EXPECT_EQ(hit.tokens, cold.tokens);
  EXPECT_GT(engine.flush_cache().pages_freed, 0u);
  const Result after_flush = run(engine, greedy(prompt, 24));
  EXPECT_EQ(after_flush.stats.cached_tokens, 0u) << "a flushed cache serves nothing";
  EXPECT_EQ(after_flush.tokens, cold.tokens);
}

TEST_F(GpuEngineTest, HostHitGeneratesTheSameTokensAsAColdRun) {
  GpuEngineConfig config = deterministic();
  config.parallel = 1;
  // A device tier of 12 pages (192 tokens) and a host tier of 64: the second conversation pushes the
  // first one's pages to host memory.
  const uint64_t page_bytes = page_bytes_of(*file_, config.page_tokens);
  config.kv_device_bytes = 12 * page_bytes;
  config.kv_host_bytes = 64 * page_bytes;
  GpuEngine& engine = start(config);
  const auto first = pseudo_random_tokens(100, 2, 320);
  const auto second = pseudo_random_tokens(100, 3, 320);
  const Result cold = run(engine, greedy(first, 16));
  run(engine, greedy(second, 16));
  const Result hit = run(engine, greedy(first, 16));
  EXPECT_GT(hit.stats.cached_tokens_host, 0u) << "the first prompt's pages were demoted, then promoted";
  EXPECT_EQ(hit.tokens, cold.tokens);
  const CacheStats stats = engine.cache_stats();
  EXPECT_GT(stats.demotions, 0u);
  EXPECT_GT(stats.promotions, 0u);
  EXPECT_LE(stats.device.bytes_used, stats.device.bytes_budget);
  EXPECT_LE(stats.host.bytes_used, stats.host.bytes_budget);
}

TEST_F(GpuEngineTest, ConversationComputesOnlyEachTurnsNewTokens) {
  GpuEngine& engine = start(deterministic());
  std::vector<int32_t> history;
  for (uint32_t turn = 0; turn < 5; ++turn) {
    const auto user = pseudo_random_tokens(20 + turn, 10 + turn, 320);
    history = concat(history, user);
    const Result r = run(engine, greedy(history, 8));
    const uint32_t computed = r.stats.prompt_tokens - r.stats.cached_tokens;
    if (turn == 0) {
      EXPECT_EQ(computed, user.size());
    } else {
      // The new user tokens, plus the previous answer's last token, whose KV was never computed.
      EXPECT_EQ(computed, user.size() + 1) << "turn " << turn;
    }
    history = concat(history, r.tokens);
  }
}

TEST_F(GpuEngineTest, ConcurrentConversationsHoldAndComputeASharedSystemPromptOnce) {
  GpuEngine& engine = start(deterministic());
  const auto system = pseudo_random_tokens(96, 42, 320);  // 6 whole pages
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Result> solo;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(concat(system, pseudo_random_tokens(10, 100 + i, 320)));
  // Each alone first, in a fresh engine, to compare with the batched run.
  for (const auto& p : prompts) {
    solo.push_back(run(engine, greedy(p, 12)));
    engine.flush_cache();
  }
  GpuEngine& batched = start(deterministic());
  std::vector<GenerationStream> streams;
  for (const auto& p : prompts) {
    auto submitted = batched.submit(greedy(p, 12));
    ASSERT_TRUE(std::holds_alternative<GenerationStream>(submitted));
    streams.push_back(std::move(std::get<GenerationStream>(submitted)));
  }
  uint64_t computed = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    const Result r = collect(streams[i]);
    EXPECT_EQ(r.tokens, solo[i].tokens) << "sequence " << i << " in a batch differs from its solo run";
    computed += r.stats.prompt_tokens - r.stats.cached_tokens;
  }
  EXPECT_LE(computed, system.size() + 8 * 10) << "the shared system prompt was computed more than once";
  const CacheStats stats = batched.cache_stats();
  // One copy of the system prompt's 6 pages, plus each conversation's own pages (suffix + answer: 2 pages).
  EXPECT_LE(stats.device.pages_used, 6u + 8u * 2u);
}

TEST_F(GpuEngineTest, SmallDeviceBudgetServesEveryRequestThroughTheHostTier) {
  GpuEngineConfig config = deterministic();
  config.parallel = 2;
  const uint64_t page_bytes = page_bytes_of(*file_, config.page_tokens);
  config.kv_device_bytes = 24 * page_bytes;  // 384 tokens on device; the working set below is ~1,000
  config.kv_host_bytes = 128 * page_bytes;
  GpuEngine& engine = start(config);
  std::vector<Result> first;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(pseudo_random_tokens(120, 200 + i, 320));
  for (const auto& p : prompts) first.push_back(run(engine, greedy(p, 8)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Result again = run(engine, greedy(prompts[i], 8));
    EXPECT_EQ(again.stats.stop_kind, StopKind::Length);
    EXPECT_EQ(again.tokens, first[i].tokens) << "prompt " << i;
  }
  const CacheStats stats = engine.cache_stats();
  EXPECT_GT(stats.demotions, 0u);
  EXPECT_LE(stats.device.bytes_used, stats.device.bytes_budget);
}

TEST_F(GpuEngineTest, WithoutDeterministicCachedAndColdAgreeWithinTolerance) {
  GpuEngineConfig config = deterministic();
  config.deterministic = false;
  GpuEngine& engine = start(config);
  auto request = greedy(pseudo_random_tokens(80, 5, 320), 1);
  request.logprobs = 1;
  const Result cold = run(engine, request);
  const Result hit = run(engine, request);
  ASSERT_EQ(cold.logprobs.size(), 1u);
  ASSERT_EQ(hit.logprobs.size(), 1u);
  EXPECT_GT(hit.stats.cached_tokens, 0u);
  // Stated tolerance: the chosen token's log-probability within 1e-3 (f16 KV, different reduction orders).
  EXPECT_NEAR(hit.logprobs[0], cold.logprobs[0], 1e-3);
}

}  // namespace
}  // namespace kvtrie::engine
