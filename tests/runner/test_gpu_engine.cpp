// The Vulkan engine end to end on lavapipe: the golden text through the GPU, and the prefix cache's
// correctness contract (SPEC.md section 4): tokens generated with a device-tier hit, a host-tier hit and a
// cold run agree exactly with --deterministic; a conversation computes only each turn's new tokens;
// concurrent requests sharing a system prompt hold and compute it once; a device budget smaller than the
// working set still serves every request through demotion and promotion. Admission control on a tiny device
// tier: requests whose total need exceeds it all complete with their solo tokens (none cancelled), a
// preempted request resumes with the tokens of an uninterrupted run, a request larger than the tier is
// rejected at submit, and the queue is FIFO. A disk hit after a restart is read while other requests decode.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "bench/synthetic/synthetic_model.h"
#include "kernels/vk/context.h"
#include "kernels/vk/instance.h"
#include "runner/engine/gpu_engine.h"
#include "runner/engine/gpu_model.h"
#include "runner/engine/request_queue.h"
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

// Each request run alone, one after another.
std::vector<Result> run_each(Engine& engine, const std::vector<GenerateRequest>& requests) {
  std::vector<Result> out;
  for (const GenerateRequest& r : requests) out.push_back(run(engine, r));
  return out;
}

// Submits every request at once and collects the results in order.
std::vector<Result> run_together(Engine& engine, const std::vector<GenerateRequest>& requests) {
  std::vector<GenerationStream> streams;
  for (const auto& r : requests) {
    auto submitted = engine.submit(r);
    EXPECT_TRUE(std::holds_alternative<GenerationStream>(submitted)) << "the engine rejected a request";
    if (auto* stream = std::get_if<GenerationStream>(&submitted)) streams.push_back(std::move(*stream));
  }
  std::vector<Result> out;
  for (auto& stream : streams) out.push_back(collect(stream));
  return out;
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

// Seeded sampling (not greedy): a resumed request must also continue its sampler's random sequence.
GenerateRequest seeded(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed) {
  GenerateRequest r = greedy(std::move(prompt), max_tokens);
  r.sampling.temperature = 0.9f;
  r.sampling.seed = seed;
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
  // deterministic() with `parallel` sequences, a device tier of `device_pages` and a host tier of
  // `host_pages`.
  GpuEngineConfig tiered(uint32_t parallel, uint64_t device_pages, uint64_t host_pages) const {
    GpuEngineConfig c = deterministic();
    c.parallel = parallel;
    const uint64_t page_bytes = page_bytes_of(*file_, c.page_tokens);
    c.kv_device_bytes = device_pages * page_bytes;
    c.kv_host_bytes = host_pages * page_bytes;
    return c;
  }
  // A disk tier of 64 MiB in a fresh directory of the test's scratch directory.
  static GpuEngineConfig with_disk_tier(GpuEngineConfig c, const std::string& name) {
    c.kv_disk_dir = test::scratch_dir() / name;
    std::filesystem::remove_all(c.kv_disk_dir);
    c.kv_disk_bytes = 64 << 20;
    return c;
  }
  // Tiers of 4 and 8 MiB (1,024 and 2,048 pages of this model; every test's working set fits on the device
  // tier several times over), where the defaults (a quarter of lavapipe's "device" memory) would make the
  // per-step cache audit of debug and sanitizer builds scan hundreds of thousands of pages.
  static GpuEngineConfig deterministic() {
    GpuEngineConfig c;
    c.n_ctx = 256;
    c.parallel = 8;
    c.page_tokens = 16;
    c.max_batch_tokens = 64;
    c.deterministic = true;
    c.kv_device_bytes = uint64_t{4} << 20;
    c.kv_host_bytes = uint64_t{8} << 20;
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

// Greedy rows without penalties or logprobs take their token from the GPU's argmax (gpu_greedy, the
// default): the same tokens and logprobs as reading the logits back and sampling them here, with greedy,
// penalized, logprob and sampled requests running together (steps mixing them read the logits back), and
// only the eligible tokens counted as picked on the GPU.
TEST_F(GpuEngineTest, GreedyTokensPickedOnTheGpuEqualTheSamplersAmongOtherRequests) {
  std::vector<GenerateRequest> requests;
  for (uint64_t i = 0; i < 3; ++i)
    requests.push_back(greedy(pseudo_random_tokens(40 + 9 * i, 10 + i, 320), 40));
  GenerateRequest penalized = greedy(pseudo_random_tokens(50, 20, 320), 40);
  penalized.sampling.repeat_penalty = 1.5f;
  GenerateRequest with_logprobs = greedy(pseudo_random_tokens(45, 21, 320), 12);
  with_logprobs.logprobs = 2;
  GenerateRequest sampled = greedy(pseudo_random_tokens(35, 22, 320), 30);
  sampled.sampling.temperature = 0.9f;
  std::vector<GenerateRequest> all = requests;
  all.insert(all.end(), {penalized, with_logprobs, sampled});
  const auto run_all = [&](bool gpu_greedy, bool together) {
    GpuEngineConfig config = deterministic();
    config.gpu_greedy = gpu_greedy;
    GpuEngine& engine = start(config);
    std::vector<Result> out = together ? run_together(engine, all) : run_each(engine, requests);
    return std::pair(out, engine.counters().completion_tokens_gpu_greedy);
  };
  const auto [alone_cpu, none] = run_all(false, false);
  const auto [alone_gpu, alone_picked] = run_all(true, false);
  EXPECT_EQ(none, 0u);
  EXPECT_EQ(alone_picked, 3u * 40u) << "every token of a lone greedy request is picked on the GPU";
  for (size_t i = 0; i < alone_cpu.size(); ++i) EXPECT_EQ(alone_gpu[i].tokens, alone_cpu[i].tokens) << i;
  const auto [mixed_cpu, none_mixed] = run_all(false, true);
  const auto [mixed_gpu, mixed_picked] = run_all(true, true);
  EXPECT_EQ(none_mixed, 0u);
  EXPECT_GT(mixed_picked, 0u);
  EXPECT_LT(mixed_picked, 3u * 40u + 40u + 12u + 30u)
      << "the penalized, logprob and sampled rows are read back";
  ASSERT_EQ(mixed_gpu.size(), mixed_cpu.size());
  for (size_t i = 0; i < mixed_cpu.size(); ++i) {
    EXPECT_EQ(mixed_gpu[i].tokens, mixed_cpu[i].tokens) << i;
    EXPECT_EQ(mixed_gpu[i].logprobs, mixed_cpu[i].logprobs) << i;
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(mixed_gpu[i].tokens, alone_cpu[i].tokens) << i;
}

// While every running request decodes greedily and none waits, each step goes in while the one before
// runs, fed its tokens on the GPU (greedy_ahead, the default): the same tokens and stop reasons as steps run
// one by one, for requests that end by length (after 1, 2, 5 and 40 tokens) and by a stop string (so a step
// ahead ran for nothing), with more requests than slots (the chain stops when one ends and the next is
// admitted), a request that arrives mid-chain, and one cancelled mid-chain; the chain's steps are counted.
TEST_F(GpuEngineTest, GreedyStepsSubmittedAheadGiveTheTokensOfStepsRunOneByOne) {
  std::vector<GenerateRequest> requests;
  const int32_t lengths[] = {40, 1, 5, 2, 30};
  for (uint64_t i = 0; i < std::size(lengths); ++i)
    requests.push_back(greedy(pseudo_random_tokens(30 + 7 * i, 40 + i, 320), lengths[i]));
  const auto run_all = [&](bool ahead, uint32_t parallel) {
    GpuEngineConfig config = deterministic();
    config.parallel = parallel;
    config.greedy_ahead = ahead;
    GpuEngine& engine = start(config);
    std::vector<Result> out = run_together(engine, requests);
    return std::pair(out, engine.counters().steps_ahead);
  };
  // A stop string from the middle of the last request's text: it ends there.
  const Result whole = run_all(false, 1).first.back();
  ASSERT_GE(whole.text.size(), 12u);
  requests.back().stop = {whole.text.substr(whole.text.size() / 2, 3)};
  for (uint32_t parallel : {1u, 3u}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    const auto [one_by_one, none] = run_all(false, parallel);
    const auto [ahead, steps_ahead] = run_all(true, parallel);
    EXPECT_EQ(none, 0u);
    // Alone, a request of n tokens decodes n - 1 steps, all but its first and last ones ahead.
    EXPECT_GE(steps_ahead, parallel == 1 ? 38u + 3u : 1u);
    ASSERT_EQ(ahead.size(), one_by_one.size());
    for (size_t i = 0; i < ahead.size(); ++i) {
      EXPECT_EQ(ahead[i].tokens, one_by_one[i].tokens) << i;
      EXPECT_EQ(ahead[i].stats.stop_kind, one_by_one[i].stats.stop_kind) << i;
      EXPECT_EQ(ahead[i].tokens.size(),
                i + 1 < requests.size() ? size_t(lengths[i]) : ahead[i].tokens.size());
    }
    EXPECT_EQ(ahead.back().stats.stop_kind, StopKind::StopString);
    EXPECT_LT(ahead.back().tokens.size(), whole.tokens.size());
  }
  // Mid-chain: a request arrives while another decodes (the chain stops, it is admitted, and both get
  // their solo tokens), then one of them is cancelled (the other goes on to its end).
  GpuEngine& engine = start(deterministic());
  const std::vector<Result> solo = run_each(engine, {requests[0], requests[2]});
  auto first = std::get<GenerationStream>(engine.submit(requests[0]));
  Chunk chunk;
  ASSERT_EQ(first.next(chunk, std::chrono::seconds(60)), StreamChannel::Poll::Chunk);
  const std::vector<int32_t> first_tokens = chunk.tokens;
  auto second = std::get<GenerationStream>(engine.submit(requests[2]));
  const Result second_result = collect(second);
  EXPECT_EQ(second_result.tokens, solo[1].tokens);
  Result rest = collect(first);
  rest.tokens.insert(rest.tokens.begin(), first_tokens.begin(), first_tokens.end());
  EXPECT_EQ(rest.tokens, solo[0].tokens);
  auto cancelled = std::get<GenerationStream>(engine.submit(greedy(pseudo_random_tokens(30, 99, 320), 200)));
  auto kept = std::get<GenerationStream>(engine.submit(requests[4]));
  ASSERT_EQ(cancelled.next(chunk, std::chrono::seconds(60)), StreamChannel::Poll::Chunk);
  cancelled.cancel();
  EXPECT_EQ(collect(cancelled).stats.stop_kind, StopKind::Cancelled);
  EXPECT_EQ(collect(kept).tokens, run_each(engine, {requests[4]})[0].tokens);
  EXPECT_GT(engine.counters().steps_ahead, 0u);
}

// Sampled rows that draw from their best entries alone (top-k sampling, no penalty that can raise a logit,
// no logprobs) read back only the GPU's best 64 logits of the row, or 128 for penalized ones (top_k plus the
// penalty window; gpu_top_candidates, the default): the same tokens as reading the rows back, for lone
// requests (every token counted) and among greedy, top-k-off and raising-penalty ones (steps mixing them
// read the rows back), under --deterministic (the same logits either way).
TEST_F(GpuEngineTest, SampledTokensDrawnFromTheGpusTopCandidatesEqualTheSamplers) {
  std::vector<GenerateRequest> sampled;
  for (uint64_t i = 0; i < 5; ++i) {
    GenerateRequest r = greedy(pseudo_random_tokens(40 + 9 * i, 60 + i, 320), 30);
    r.sampling = SamplingParams{};  // temperature 0.8, top_k 40, top_p 0.95, min_p 0.05
    r.sampling.seed = 70 + i;
    if (i == 1) r.sampling.top_k = 64;
    if (i == 2) r.sampling.temperature = 1.7f;
    if (i == 3) r.sampling.repeat_penalty = 1.3f;  // over the last 64: 104 entries, a wide step
    if (i == 4) {                                  // 32 + 32 entries: a narrow step
      r.sampling.top_k = 32;
      r.sampling.repeat_last_n = 32;
      r.sampling.presence_penalty = 0.5f;
      r.sampling.frequency_penalty = 0.3f;
    }
    sampled.push_back(r);
  }
  GenerateRequest greedy_one = greedy(pseudo_random_tokens(44, 63, 320), 30);
  GenerateRequest raising = sampled[0];
  raising.sampling.presence_penalty = -0.5f;
  GenerateRequest no_top_k = sampled[0];
  no_top_k.sampling.top_k = 0;
  std::vector<GenerateRequest> all = sampled;
  all.insert(all.end(), {greedy_one, raising, no_top_k});
  const auto run_all = [&](bool gpu_top, bool together) {
    GpuEngineConfig config = deterministic();
    config.gpu_top_candidates = gpu_top;
    GpuEngine& engine = start(config);
    std::vector<Result> out = together ? run_together(engine, all) : run_each(engine, sampled);
    return std::pair(out, engine.counters().completion_tokens_gpu_top_candidates);
  };
  const auto [alone_rows, none] = run_all(false, false);
  const auto [alone_top, alone_drawn] = run_all(true, false);
  EXPECT_EQ(none, 0u);
  EXPECT_EQ(alone_drawn, 5u * 30u) << "every token of a lone top-k request is drawn from the GPU's best";
  for (size_t i = 0; i < alone_rows.size(); ++i) EXPECT_EQ(alone_top[i].tokens, alone_rows[i].tokens) << i;
  const auto [mixed_rows, none_mixed] = run_all(false, true);
  const auto [mixed_top, mixed_drawn] = run_all(true, true);
  EXPECT_EQ(none_mixed, 0u);
  EXPECT_GT(mixed_drawn, 0u);
  EXPECT_LT(mixed_drawn, 5u * 30u) << "steps with the raising-penalty or top-k-off rows read the rows back";
  ASSERT_EQ(mixed_top.size(), mixed_rows.size());
  for (size_t i = 0; i < mixed_rows.size(); ++i) EXPECT_EQ(mixed_top[i].tokens, mixed_rows[i].tokens) << i;
  for (size_t i = 0; i < sampled.size(); ++i) EXPECT_EQ(mixed_top[i].tokens, alone_rows[i].tokens) << i;
}

// A step's sampled rows are sampled on several threads at once: each of 6 sampled requests running together
// draws the tokens it draws alone (its own seeded sampler, the same logits under --deterministic).
TEST_F(GpuEngineTest, RowsSampledTogetherDrawEachRequestsSoloTokens) {
  std::vector<GenerateRequest> requests;
  for (uint64_t i = 0; i < 6; ++i) {
    GenerateRequest r = greedy(pseudo_random_tokens(30 + 7 * i, 40 + i, 320), 32);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 100 + i;
    if (i % 2) r.sampling.repeat_penalty = 1.2f;
    requests.push_back(r);
  }
  GpuEngine& engine = start(deterministic());
  const std::vector<Result> alone = run_each(engine, requests);
  const std::vector<Result> together = run_together(engine, requests);
  for (size_t i = 0; i < together.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << i;
}

TEST_F(GpuEngineTest, DeviceHitGeneratesTheSameTokensAsAColdRun) {
  GpuEngine& engine = start(deterministic());
  const auto prompt = pseudo_random_tokens(70, 1, 320);
  const Result cold = run(engine, greedy(prompt, 24));
  EXPECT_EQ(cold.stats.cached_tokens, 0u);
  const Result hit = run(engine, greedy(prompt, 24));
  EXPECT_EQ(hit.stats.cached_tokens, prompt.size() - 1)
      << "all but the last prompt token come from the cache";
  EXPECT_EQ(hit.stats.cached_tokens_device, hit.stats.cached_tokens);
  EXPECT_EQ(hit.tokens, cold.tokens);
  EXPECT_GT(engine.flush_cache().pages_freed, 0u);
  const Result after_flush = run(engine, greedy(prompt, 24));
  EXPECT_EQ(after_flush.stats.cached_tokens, 0u) << "a flushed cache serves nothing";
  EXPECT_EQ(after_flush.tokens, cold.tokens);
}

TEST_F(GpuEngineTest, HostHitGeneratesTheSameTokensAsAColdRun) {
  // A device tier of 12 pages (192 tokens) and a host tier of 64: the second conversation pushes the
  // first one's pages to host memory.
  GpuEngineConfig config = tiered(1, 12, 64);
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
  GpuEngineConfig config = tiered(2, 24, 128);  // 384 tokens on device; the working set below is ~1,000
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

TEST_F(GpuEngineTest, RequestsBeyondTheDeviceTierAllCompleteWithTheirSoloTokens) {
  GpuEngineConfig config = tiered(4, 12, 32);  // 192 tokens; six requests of 60 tokens need 24 pages
  GpuEngine& engine = start(config);
  // Each is promised 3 pages at admission (its prompt's 2 and one of growth) and ends holding 4: four start
  // together, and their growth preempts the newest.
  std::vector<GenerateRequest> requests;
  for (uint32_t i = 0; i < 6; ++i)
    requests.push_back(seeded(pseudo_random_tokens(20, 300 + i, 320), 40, 11 + i));
  std::vector<Result> solo;
  for (const auto& r : requests) {
    solo.push_back(run(engine, r));
    engine.flush_cache();  // every request starts cold, so four are admitted together
  }
  const std::vector<Result> together = run_together(engine, requests);
  ASSERT_EQ(together.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i].stats.stop_kind, StopKind::Length) << "request " << i;
    EXPECT_EQ(together[i].tokens, solo[i].tokens) << "request " << i << " differs from its solo run";
    EXPECT_EQ(together[i].text, solo[i].text) << "request " << i;
  }
  const EngineCounters c = engine.counters();
  EXPECT_EQ(c.requests_cancelled, 0u);
  EXPECT_EQ(c.requests_completed, 12u);
  EXPECT_GE(c.requests_preempted, 1u) << "growth past the admission promises must have preempted someone";
  EXPECT_LE(engine.cache_stats().device.bytes_used, engine.cache_stats().device.bytes_budget);
}

TEST_F(GpuEngineTest, PreemptedRequestResumesWithTheTokensOfAnUninterruptedRun) {
  GpuEngineConfig config = tiered(2, 4, 16);  // 48 tokens for one request: each alone fits, the two do not
  GpuEngine& engine = start(config);
  const std::vector<GenerateRequest> requests{seeded(pseudo_random_tokens(10, 400, 320), 38, 5),
                                              seeded(pseudo_random_tokens(10, 401, 320), 38, 6)};
  std::vector<Result> solo;
  for (const auto& r : requests) {
    solo.push_back(run(engine, r));
    engine
        .flush_cache();  // cold again: a cached prompt would cost more to admit and the two would not overlap
  }
  ASSERT_EQ(engine.counters().requests_preempted, 0u);
  const std::vector<Result> together = run_together(engine, requests);
  ASSERT_EQ(together.size(), 2u);
  EXPECT_GE(engine.counters().requests_preempted, 1u) << "the two requests need 6 pages of 4: one must yield";
  EXPECT_EQ(engine.counters().requests_cancelled, 0u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(together[i].stats.stop_kind, StopKind::Length) << "request " << i;
    EXPECT_EQ(together[i].stats.completion_tokens, 38u) << "request " << i;
    // Streamed tokens are neither repeated nor lost across the preemption, and sampling continues its seed.
    EXPECT_EQ(together[i].tokens, solo[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].text, solo[i].text) << "request " << i;
  }
}

TEST_F(GpuEngineTest, RequestCancelledWhileWaitingToResumeEndsCleanly) {
  GpuEngineConfig config = tiered(2, 4, 16);
  GpuEngine& engine = start(config);
  const auto first = seeded(pseudo_random_tokens(10, 410, 320), 38, 5);
  const auto second = seeded(pseudo_random_tokens(10, 411, 320), 38, 6);
  const Result solo_first = run(engine, first);
  const Result solo_second = run(engine, second);
  engine.flush_cache();
  auto a = std::get<GenerationStream>(engine.submit(first));
  auto b = std::get<GenerationStream>(engine.submit(second));
  // The second is preempted when the first grows, and waits for the first to end: cancel it meanwhile.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (engine.counters().requests_preempted == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  ASSERT_GE(engine.counters().requests_preempted, 1u);
  b.cancel();
  const Result ra = collect(a);
  const Result rb = collect(b);
  EXPECT_EQ(ra.tokens, solo_first.tokens);
  EXPECT_EQ(ra.stats.stop_kind, StopKind::Length);
  EXPECT_EQ(rb.stats.stop_kind, StopKind::Cancelled);
  ASSERT_LE(rb.tokens.size(), solo_second.tokens.size());
  EXPECT_TRUE(std::equal(rb.tokens.begin(), rb.tokens.end(), solo_second.tokens.begin()))
      << "what the cancelled request streamed is a prefix of its solo run";
  EXPECT_EQ(engine.counters().requests_cancelled, 1u);
  // The gauges are updated at the end of the engine's step, just after the final chunks went out.
  while ((engine.counters().active != 0 || engine.counters().queued != 0) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine.counters().active, 0u);
  EXPECT_EQ(engine.counters().queued, 0u);
}

// A disk hit after a restart is read in the background: a request already decoding keeps producing tokens
// while the pages come in (every page read here takes a second), and the hit's tokens equal a cold run's.
// Without overlap the hit waits for the whole read, so every page comes from disk.
TEST_F(GpuEngineTest, ADiskHitIsReadWhileAnotherRequestKeepsDecoding) {
  GpuEngineConfig config = with_disk_tier(tiered(2, 16, 32), "kv-disk");
  config.kv_disk_overlap = false;
  const GenerateRequest long_prompt = greedy(pseudo_random_tokens(100, 512, 320), 4);
  const Result cold = run(start(config), long_prompt);
  engine_.reset();  // persists its pages to disk at shutdown
  config.kv_disk_read_delay = std::chrono::milliseconds(1000);
  GpuEngine& engine = start(config);
  auto other = std::get<GenerationStream>(engine.submit(greedy(pseudo_random_tokens(10, 513, 320), 200)));
  Chunk chunk;
  size_t other_tokens = 0;
  while (other_tokens == 0 && other.next(chunk, std::chrono::seconds(60)) == StreamChannel::Poll::Chunk)
    other_tokens += chunk.tokens.size();
  ASSERT_GT(other_tokens, 0u) << "the decoding request never started";
  // What it produced before the hit is submitted is not counted (its stream buffers chunks).
  while (other.next(chunk, std::chrono::milliseconds(0)) == StreamChannel::Poll::Chunk)
    other_tokens += chunk.tokens.size();
  const size_t before = other_tokens;
  auto hit = std::get<GenerationStream>(engine.submit(long_prompt));
  Result got;
  std::optional<GenerationStats> stats;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  size_t during_read = 0;  // the other request's tokens between the hit's submission and its first token
  while (got.tokens.empty() && Clock::now() < deadline) {
    if (other.next(chunk, std::chrono::milliseconds(5)) == StreamChannel::Poll::Chunk)
      other_tokens += chunk.tokens.size();
    Chunk first;
    if (hit.next(first, std::chrono::milliseconds(0)) == StreamChannel::Poll::Chunk) {
      got.tokens = first.tokens;
      during_read = other_tokens - before;
      if (first.final) stats = *first.final;
    }
  }
  ASSERT_FALSE(got.tokens.empty()) << "the disk hit never produced a token";
  // Read on the engine thread, the step that admits the hit would stall a second: a token or two at most.
  EXPECT_GE(during_read, 4u) << "the engine stalled while the disk pages were read";
  const Result rest = collect(hit);
  got.tokens.insert(got.tokens.end(), rest.tokens.begin(), rest.tokens.end());
  if (!stats) stats = rest.stats;
  EXPECT_EQ(got.tokens, cold.tokens);
  EXPECT_EQ(stats->cached_tokens_disk, 96u) << "6 full pages of the 99 usable prompt tokens";
  other.cancel();
}

// With overlap (the default) a disk hit computes its first pages while its last ones are read; where the two
// meet depends on the disk's and the device's speeds (the cache test has a meet in the middle under
// control). Pages in the page cache (a restart right after the shutdown wrote them) are read whole first:
// all 14 full pages from disk. On a disk that takes a few ms a page, whichever way it splits, the answer is
// a cold run's and every cached token came from disk in whole pages. On a slow one (one read in flight, 4 s
// a page: 56 s for the 14 full pages) the hit computes them all rather than waiting: no page from disk, and
// the answer long before the read. (With 1 s a page, a TSan build computed only 208 tokens before the
// first page came back.)
TEST_F(GpuEngineTest, ADiskHitComputesItsFirstPagesWhileItsLastOnesAreRead) {
  GpuEngineConfig config = with_disk_tier(tiered(1, 32, 32), "kv-disk-overlap");
  const GenerateRequest prompt = greedy(pseudo_random_tokens(240, 514, 320), 4);
  const Result cold = run(start(config), prompt);
  engine_.reset();  // persists its pages to disk at shutdown
  const Result in_memory = run(start(config), prompt);
  EXPECT_EQ(in_memory.tokens, cold.tokens);
  EXPECT_EQ(in_memory.stats.cached_tokens_disk, 224u) << "in the page cache, the run is read whole";
  engine_.reset();

  config.kv_disk_read_delay = std::chrono::milliseconds(3);
  const Result fast = run(start(config), prompt);
  EXPECT_EQ(fast.tokens, cold.tokens);
  EXPECT_EQ(fast.stats.cached_tokens, fast.stats.cached_tokens_disk);
  EXPECT_EQ(fast.stats.cached_tokens_disk % 16, 0u);
  EXPECT_LE(fast.stats.cached_tokens_disk, 224u);
  engine_.reset();

  config.kv_disk_read_delay = std::chrono::milliseconds(4000);
  config.kv_disk_readers = 1;
  GpuEngine& engine = start(config);
  const auto submitted = Clock::now();
  const Result slow = run(engine, prompt);
  EXPECT_LT(Clock::now() - submitted, std::chrono::seconds(7)) << "the hit waited for its read";
  EXPECT_EQ(slow.tokens, cold.tokens);
  EXPECT_EQ(slow.stats.cached_tokens_disk, 0u);
}

// A request cancelled while it computes beside its disk read (one read at a time, 100 ms a page) ends
// cleanly; the read goes on without it (what it reads stays cached for a retry), and the same prompt then
// gets a cold run's tokens.
TEST_F(GpuEngineTest, ARequestCancelledDuringItsDiskReadEndsCleanlyAndTheNextIsServed) {
  GpuEngineConfig config = with_disk_tier(tiered(1, 32, 32), "kv-disk-cancel");
  const GenerateRequest prompt = greedy(pseudo_random_tokens(240, 515, 320), 4);
  const Result cold = run(start(config), prompt);
  engine_.reset();  // persists its pages to disk at shutdown
  config.kv_disk_read_delay = std::chrono::milliseconds(100);
  config.kv_disk_readers = 1;
  GpuEngine& engine = start(config);
  auto cancelled = std::get<GenerationStream>(engine.submit(prompt));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (engine.counters().active == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  cancelled.cancel();
  const Result ended = collect(cancelled);
  EXPECT_EQ(ended.stats.stop_kind, StopKind::Cancelled);
  const Result again = run(engine, prompt);
  EXPECT_EQ(again.tokens, cold.tokens);
  EXPECT_EQ(engine.counters().requests_cancelled, 1u);
}

TEST_F(GpuEngineTest, RequestLargerThanTheDeviceTierIsRejectedAtSubmit) {
  GpuEngineConfig config = deterministic();
  const uint64_t page_bytes = page_bytes_of(*file_, config.page_tokens);
  config.kv_device_bytes = 4 * page_bytes;  // 64 tokens, 48 for one request (a page of copy-on-write slack)
  GpuEngine& engine = start(config);
  const auto prompt = pseudo_random_tokens(20, 500, 320);
  for (int32_t max_tokens : {29, -1}) {  // 49 tokens; up to the context (256)
    auto submitted = engine.submit(greedy(prompt, max_tokens));
    ASSERT_TRUE(std::holds_alternative<SubmitRejection>(submitted)) << "max_tokens " << max_tokens;
    const SubmitRejection& rejection = std::get<SubmitRejection>(submitted);
    EXPECT_EQ(rejection.error, SubmitError::InvalidRequest);
    EXPECT_NE(rejection.message.find("device KV tier"), std::string::npos) << rejection.message;
  }
  EXPECT_EQ(engine.counters().requests_rejected, 2u);
  const Result fits = run(engine, greedy(prompt, 28));  // exactly 48 tokens
  EXPECT_EQ(fits.stats.stop_kind, StopKind::Length);
  EXPECT_EQ(fits.tokens.size(), 28u);
}

TEST_F(GpuEngineTest, QueueIsFifoASmallRequestDoesNotOvertakeABigHead) {
  GpuEngineConfig config = tiered(4, 8, 32);
  GpuEngine& engine = start(config);
  // The first two are promised 7 of the 8 pages each; the third needs 1. Greedy filling would run the third
  // beside the first; FIFO holds it behind the second, which waits for the first to end.
  const std::vector<GenerateRequest> requests{greedy(pseudo_random_tokens(100, 600, 320), 8),
                                              greedy(pseudo_random_tokens(100, 601, 320), 8),
                                              greedy(pseudo_random_tokens(5, 602, 320), 4)};
  const auto before = Clock::now();
  std::vector<GenerationStream> streams;
  for (const auto& r : requests) streams.push_back(std::move(std::get<GenerationStream>(engine.submit(r))));
  const double submit_ms = ms_between(before, Clock::now());
  std::vector<Result> results;
  for (auto& stream : streams) results.push_back(collect(stream));
  for (const Result& r : results) EXPECT_EQ(r.stats.stop_kind, StopKind::Length);
  // The first request ended (submit + ttft + decode) before the third sampled its first token (submit +
  // ttft); the submits lie within submit_ms of each other.
  const GenerationStats& first = results[0].stats;
  const GenerationStats& third = results[2].stats;
  EXPECT_GE(third.ttft_ms + submit_ms, first.ttft_ms + first.decode_ms)
      << "the small request started before the big request ahead of it in the queue";
  EXPECT_EQ(engine.counters().requests_cancelled, 0u);
}

TEST_F(GpuEngineTest, DeviceTierIsCappedAtTheBindingsAttentionReads) {
  GpuEngineConfig config = deterministic();
  config.parallel = 2;
  const uint64_t page_bytes = page_bytes_of(*file_, config.page_tokens);
  const uint64_t per_binding = context().device().max_storage_buffer_range() / page_bytes;
  // More than kMaxPageChunks bindings asked for: the tier gets exactly that many full chunks.
  config.kv_device_bytes = (GpuModel::kMaxPageChunks * per_binding + 7) * page_bytes;
  config.kv_host_bytes = 16 * page_bytes;
  GpuEngine& engine = start(config);
  EXPECT_EQ(engine.memory_use().kv_device, GpuModel::kMaxPageChunks * per_binding * page_bytes);
  EXPECT_EQ(engine.cache_stats().device.pages_total, GpuModel::kMaxPageChunks * per_binding);
  const Result r = run(engine, greedy(pseudo_random_tokens(40, 700, 320), 8));
  EXPECT_EQ(r.stats.stop_kind, StopKind::Length);
}

// Seeded random waves of concurrent requests over a few shared prefixes, diverging at random positions
// (inside pages too: copy-on-write), some extending an earlier request's prompt and answer (a conversation
// turn), on a device tier smaller than what they hold together (demotion, promotion while others run,
// preemption). With
// --deterministic every request must give exactly the tokens of its own cold run. Set KVTRIE_SEED to replay.
TEST_F(GpuEngineTest, RandomConcurrentSharedPrefixWorkloadMatchesColdRuns) {
  const char* seed_text = std::getenv("KVTRIE_SEED");
  const uint32_t seed =
      seed_text != nullptr ? static_cast<uint32_t>(std::strtoul(seed_text, nullptr, 10)) : 2026;
  SCOPED_TRACE("KVTRIE_SEED=" + std::to_string(seed));
  std::mt19937 rng(seed);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  GpuEngineConfig config = tiered(4, 16, 48);  // 256 tokens; four running requests hold up to 4 x 140
  GpuEngine& engine = start(config);
  GpuEngine cold_engine(context(), *file_, *tokenizer_, deterministic());

  std::vector<std::vector<int32_t>> prefixes;
  for (uint32_t i = 0; i < 3; ++i) prefixes.push_back(pseudo_random_tokens(24 + 17 * i, seed + i, 320));
  std::vector<std::vector<int32_t>> history;  // earlier prompts followed by their answers
  uint64_t host_hits = 0, cached = 0;
  for (uint32_t wave = 0; wave < 6; ++wave) {
    std::vector<GenerateRequest> requests;
    for (uint32_t i = 0; i < 6; ++i) {
      std::vector<int32_t> prompt;
      if (!history.empty() && below(2) == 0) {
        prompt = history[below(static_cast<uint32_t>(history.size()))];  // the next turn of a conversation
      } else {
        const auto& base = prefixes[below(static_cast<uint32_t>(prefixes.size()))];
        prompt.assign(base.begin(), base.begin() + 1 + below(static_cast<uint32_t>(base.size())));
      }
      prompt = concat(prompt, pseudo_random_tokens(1 + below(20), seed * 100 + wave * 10 + i, 320));
      if (prompt.size() > 100) prompt.resize(100);
      requests.push_back(greedy(prompt, 4 + static_cast<int32_t>(below(36))));
    }
    const std::vector<Result> together = run_together(engine, requests);
    ASSERT_EQ(together.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      host_hits += together[i].stats.cached_tokens_host;
      cached += together[i].stats.cached_tokens;
      history.push_back(concat(requests[i].prompt, together[i].tokens));
    }
    // Each request alone on a second engine whose cache is flushed first: its cold run.
    for (size_t i = 0; i < requests.size(); ++i) {
      cold_engine.flush_cache();
      const Result cold = run(cold_engine, requests[i]);
      EXPECT_EQ(together[i].tokens, cold.tokens) << "wave " << wave << " request " << i;
    }
    const CacheStats stats = engine.cache_stats();
    EXPECT_LE(stats.device.bytes_used, stats.device.bytes_budget);
    EXPECT_LE(stats.host.bytes_used, stats.host.bytes_budget);
  }
  cold_engine.shutdown(std::chrono::milliseconds(0));
  const EngineCounters c = engine.counters();
  EXPECT_EQ(c.requests_cancelled, 0u);
  // The workload must exercise what it is for, or it proves little.
  EXPECT_GT(cached, 0u);
  EXPECT_GT(host_hits, 0u);
  EXPECT_GT(engine.cache_stats().promotions, 0u);
  std::printf("seed %u: cached %llu tokens (host %llu), demotions %llu, promotions %llu, preempted %llu\n",
              seed, static_cast<unsigned long long>(cached), static_cast<unsigned long long>(host_hits),
              static_cast<unsigned long long>(engine.cache_stats().demotions),
              static_cast<unsigned long long>(engine.cache_stats().promotions),
              static_cast<unsigned long long>(c.requests_preempted));
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
