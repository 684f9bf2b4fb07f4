// The Vulkan forward pass (GpuModel) against the CPU reference model on lavapipe: tiny synthetic llama,
// qwen2 (qkv bias) and qwen3 (q/k norm) models in every weight type, a prompt run as one batch and then
// token-by-token decode steps; step recording: a repeated batch shape replays its recording and gives the
// same bits as a fresh recording; --deterministic attention in blocks of tokens against small steps; and
// which builds a float decode step takes.
//
// Tolerance: both sides decode the same quantized weights exactly, compute in f32 and keep K/V in f16 (the
// reference rounds them as the GPU's pages do), but sum in different orders, so |gpu - ref| <= 2e-4 *
// max(1, max |ref|) over a row of logits (measured worst case on lavapipe 2.4e-5, printed by the test; a
// wrong op moves logits by the scale itself). Models whose products run on matvec_q8 (8-bit activations:
// here the K-quants, whose tiny rows are whole 256-value groups) differ from the f32 reference by that
// rounding, compounded over the layers: bound 4e-2 (measured about 1.2e-2). The rounding itself is
// checked exactly against its own reference in tests/kernels/test_matvec_q8.cpp; it cannot be here, since
// the CPU and the GPU round a value near a tie differently now and then, and one such flip spreads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/synthetic/synthetic_model.h"
#include "cache/vk_page_store.h"
#include "kernels/ops/matmul.h"
#include "runner/engine/gpu_model.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "runner/reference/reference_model.h"
#include "tests/support/paths.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::engine {
namespace {

const std::vector<int32_t> kPrompt{1, 72, 101, 108, 108, 111, 44, 32, 119, 300, 5, 17, 250};
constexpr uint32_t kDecodeSteps = 3;
constexpr uint32_t kPages = 8;  // 16 tokens each: one sequence of up to 128 positions

// A model on the GPU with its own pages; sequence 0 owns pages 0..kPages-1.
struct Rig {
  GgufFile file;
  ModelConfig config;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<VkPageStore> pages;

  uint32_t n_pages;

  Rig(vk::Context& ctx, const std::filesystem::path& path, uint32_t pages_of_seq = kPages,
      uint32_t attention_split = 0, bool deterministic = false, uint32_t max_batch_tokens = 32,
      bool coopmat2 = false, bool decode_attention = true, bool logits_copy = false)
      : Rig(ctx, path, pages_of_seq, [&](GpuModelOptions& o) {
          o.decode_attention = decode_attention;
          o.max_batch_tokens = max_batch_tokens;
          o.deterministic = deterministic;
          o.coopmat2 = coopmat2;
          o.attention_split = attention_split;
          o.logits_copy = logits_copy;
        }) {}

  // With the options `tune` sets (16 sequences of pages_of_seq pages each).
  Rig(vk::Context& ctx, const std::filesystem::path& path, uint32_t pages_of_seq,
      const std::function<void(GpuModelOptions&)>& tune)
      : file(GgufFile::open(path)), config(ModelConfig::from_gguf(file)), n_pages(pages_of_seq) {
    GpuModelOptions o;
    o.max_sequences = 16;
    o.max_context = n_pages * 16;
    tune(o);
    model = std::make_unique<GpuModel>(ctx, file, config, o);
    pages = std::make_unique<VkPageStore>(ctx, model->kv_layout(), n_pages, 0);
    model->bind_pages(*pages);
  }

  // Tokens at positions first.. of sequence 0, logits for every token (or the last `logits_last`).
  Batch batch_of(std::span<const int32_t> tokens, uint32_t first, uint32_t logits_last = 0) const {
    Batch b;
    std::vector<uint32_t> table(n_pages);
    std::iota(table.begin(), table.end(), 0u);
    b.add_sequence(table);
    for (uint32_t i = 0; i < tokens.size(); ++i) {
      b.tokens.push_back(tokens[i]);
      b.positions.push_back(first + i);
      b.seq.push_back(0);
      if (logits_last == 0 || i + logits_last >= tokens.size()) b.logits_for.push_back(i);
    }
    return b;
  }

  // Runs batch_of(tokens, first, logits_last); returns its logits rows.
  std::vector<float> step(std::span<const int32_t> tokens, uint32_t first, uint32_t logits_last = 0) {
    const std::span<const float> logits = model->forward(batch_of(tokens, first, logits_last));
    return {logits.begin(), logits.end()};
  }

  // The same step with Batch::greedy_only: each logits row's greedy token, no logits read back.
  std::vector<int32_t> greedy_step(std::span<const int32_t> tokens, uint32_t first) {
    Batch b = batch_of(tokens, first);
    b.greedy_only = true;
    EXPECT_TRUE(model->forward(b).empty());
    const std::span<const int32_t> ids = model->greedy_tokens();
    return {ids.begin(), ids.end()};
  }

  // The same step with Batch::top_candidates: each logits row's best k ids and logits.
  GpuModel::TopCandidates top_step(std::span<const int32_t> tokens, uint32_t first, uint32_t k) {
    Batch b = batch_of(tokens, first);
    b.top_candidates = k;
    EXPECT_TRUE(model->forward(b).empty());
    return model->top_candidates();
  }
};

float max_abs(std::span<const float> v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

class GpuModelTest : public test::VulkanTest {};

TEST_F(GpuModelTest, EveryArchitectureAndTypeMatchesTheCpuReference) {
  const TensorType types[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                              TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                              TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
  float worst_seen = 0, worst_seen_q8 = 0;
  for (const char* preset : {"tiny", "tiny-qwen2", "tiny-qwen3"}) {
    for (TensorType type : types) {
      const std::string label = std::string(preset) + " " + std::string(tensor_type_info(type).name);
      SCOPED_TRACE(label);
      const auto path = synth::write_preset(test::scratch_dir() / "gpu_model.gguf", preset, type, 3);
      Rig rig(context(), path);
      const reference::ReferenceModel ref(rig.file, {.f16_kv = true});
      const bool q8 = rig.model->uses_q8_activations();
      reference::ReferenceModel::Sequence seq = ref.new_sequence();

      std::vector<int32_t> tokens = kPrompt;
      for (uint32_t i = 0; i < kDecodeSteps; ++i) tokens.push_back(static_cast<int32_t>(40 + 7 * i));
      const std::vector<float> expected = ref.forward_all(seq, tokens);

      std::vector<float> got = rig.step(kPrompt, 0);  // the prompt as one batch
      for (uint32_t i = 0; i < kDecodeSteps; ++i) {   // then one token per step
        const auto pos = static_cast<uint32_t>(kPrompt.size() + i);
        const std::vector<float> row = rig.step(std::span(tokens).subspan(pos, 1), pos);
        got.insert(got.end(), row.begin(), row.end());
      }
      ASSERT_EQ(got.size(), expected.size());
      const size_t n = rig.config.n_vocab;
      for (size_t t = 0; t < tokens.size(); ++t) {
        const std::span<const float> e(expected.data() + t * n, n), g(got.data() + t * n, n);
        const float bound = (q8 ? 4e-2f : 2e-4f) * std::max(1.0f, max_abs(e));
        float worst = 0;
        for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(g[i] - e[i]));
        EXPECT_LE(worst, bound) << "token " << t;
        float& seen = q8 ? worst_seen_q8 : worst_seen;
        seen = std::max(seen, worst / std::max(1.0f, max_abs(e)));
      }
    }
  }
  std::printf("worst |gpu - ref| / max(1, max |ref|): %.2e (models on matvec_q8: %.2e)\n", worst_seen,
              worst_seen_q8);
}

TEST_F(GpuModelTest, RepeatedShapeReplaysItsRecordingWithTheSameBits) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_replay.gguf", "tiny", TensorType::Q8_0, 5);
  Rig replayed(context(), path), fresh(context(), path);
  const std::vector<int32_t> decode{30, 31, 32};
  for (Rig* r : {&replayed, &fresh}) r->step(kPrompt, 0);
  const auto P = static_cast<uint32_t>(kPrompt.size());
  for (Rig* r : {&replayed, &fresh}) r->step(std::span(decode).subspan(0, 1), P);
  EXPECT_EQ(replayed.model->recordings_made(), 2u);  // the prompt's shape and the decode shape

  fresh.model->set_profiling(false);  // drops every recording: the next step is recorded anew
  const std::vector<float> a = replayed.step(std::span(decode).subspan(1, 1), P + 1);
  const std::vector<float> b = fresh.step(std::span(decode).subspan(1, 1), P + 1);
  EXPECT_EQ(replayed.model->recordings_made(), 2u) << "the decode step was recorded again, not replayed";
  EXPECT_EQ(fresh.model->recordings_made(), 3u);
  EXPECT_EQ(a, b);

  // A different token in the replayed shape gives different logits: the replay reads this step's inputs.
  const std::vector<float> c = replayed.step(std::span(decode).subspan(2, 1), P + 2);
  EXPECT_NE(c, a);
}

// Span timing (kvtrie-bench decode --span): the device's time on a step, from timestamps at its start and
// end, without a bit of the logits changing; none without it.
TEST_F(GpuModelTest, SpanTimingTimesAStepWithoutChangingItsBits) {
  if (!context().device().info().timestamps) GTEST_SKIP() << "device has no compute timestamps";
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_span.gguf", "tiny", TensorType::Q4_0, 5);
  Rig timed(context(), path), plain(context(), path);
  timed.model->set_span_timing(true);
  const auto P = static_cast<uint32_t>(kPrompt.size());
  for (Rig* r : {&timed, &plain}) r->step(kPrompt, 0);
  const std::vector<int32_t> next{40};
  EXPECT_EQ(timed.step(next, P), plain.step(next, P));
  EXPECT_GT(timed.model->last_span_ms(), 0.0);
  EXPECT_EQ(plain.model->last_span_ms(), 0.0);
}

// Both rigs give the same bits for kPrompt's rows and then for each of `next` as a decode step (not all 0).
void expect_same_logits(Rig& a, Rig& b, const std::vector<int32_t>& next) {
  EXPECT_EQ(a.step(kPrompt, 0), b.step(kPrompt, 0));
  const auto P = static_cast<uint32_t>(kPrompt.size());
  for (uint32_t i = 0; i < next.size(); ++i) {
    const std::vector<float> logits = a.step(std::span(next).subspan(i, 1), P + i);
    EXPECT_EQ(logits, b.step(std::span(next).subspan(i, 1), P + i)) << "decode step " << i;
    EXPECT_GT(max_abs(logits), 0.0f);
  }
}

// The output product writes the logits into host memory itself (GpuModelOptions::logits_copy false): the
// same bits as through device memory and a copy, for a prompt's rows (a batch) and decode steps, on a model
// whose logits take matvec_q8 (Q8_0) and one whose take the fused float product (F16), also --deterministic.
TEST_F(GpuModelTest, LogitsWrittenToHostMemoryEqualThoseCopiedThere) {
  for (TensorType type : {TensorType::Q8_0, TensorType::F16}) {
    for (bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tensor_type_info(type).name) + (deterministic ? ", deterministic" : ""));
      const auto path = synth::write_preset(test::scratch_dir() / "gpu_model_logits.gguf", "tiny", type, 9);
      Rig direct(context(), path, kPages, 0, deterministic),
          copied(context(), path, kPages, 0, deterministic, 32, false, true, true);
      expect_same_logits(direct, copied, {41, 42, 43});
    }
  }
}

// The one-token logits product in 1 or 4 rows a lane (GpuModelOptions::logits_rows_per_lane; the rule gives
// Q4_0's and the K-quants' logits of 16384 rows and more 4): a lane's rows do not change a row's sums, so the
// logits are the same bits, read back and through greedy steps, on a model whose logits take matvec_q8.
TEST_F(GpuModelTest, LogitsInOneOrFourRowsALaneAreTheSameBits) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_lanes.gguf", "tiny", TensorType::Q4_K, 4);
  Rig one(context(), path, kPages, [](GpuModelOptions& o) { o.logits_rows_per_lane = 1; });
  Rig four(context(), path, kPages, [](GpuModelOptions& o) { o.logits_rows_per_lane = 4; });
  expect_same_logits(one, four, {31, 32, 33});
  const auto P = static_cast<uint32_t>(kPrompt.size());
  EXPECT_EQ(one.greedy_step(std::vector<int32_t>{34}, P + 3),
            four.greedy_step(std::vector<int32_t>{34}, P + 3));
  Rig two(context(), path, kPages, [](GpuModelOptions& o) { o.logits_rows_per_lane = 2; });
  two.step(kPrompt, 0);
  EXPECT_THROW(two.step(std::vector<int32_t>{31}, P), Error) << "2 rows a lane has no build";
}

// A greedy_only step gives each logits row's greedy token (the first largest logit) without reading the
// rows back: a prompt's rows (a batch) and decode steps, on the products each type takes (matvec_q8 for
// Q8_0, the fused float product for F16), by default and under --deterministic; a step with logits after
// it still has them (the recordings differ in their end only).
TEST_F(GpuModelTest, GreedyStepsGiveEachRowsFirstLargestLogit) {
  const auto first_largest = [](std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  };
  for (TensorType type : {TensorType::Q8_0, TensorType::F16}) {
    for (bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tensor_type_info(type).name) + (deterministic ? ", deterministic" : ""));
      const auto path = synth::write_preset(test::scratch_dir() / "gpu_model_greedy.gguf", "tiny", type, 3);
      Rig rig(context(), path, kPages, 0, deterministic);
      const uint32_t V = rig.config.n_vocab;
      const std::vector<float> rows = rig.step(kPrompt, 0);
      const std::vector<int32_t> greedy = rig.greedy_step(kPrompt, 0);
      ASSERT_EQ(greedy.size(), kPrompt.size());
      for (size_t r = 0; r < greedy.size(); ++r)
        EXPECT_EQ(greedy[r], first_largest(std::span<const float>(rows).subspan(r * V, V))) << "row " << r;
      const auto P = static_cast<uint32_t>(kPrompt.size());
      for (uint32_t i = 0; i < 3; ++i) {
        const std::vector<int32_t> token{static_cast<int32_t>(20 + i)};
        const std::vector<int32_t> picked = rig.greedy_step(token, P + i);
        const std::vector<float> logits = rig.step(token, P + i);
        ASSERT_EQ(picked.size(), 1u);
        ASSERT_EQ(logits.size(), V) << "a step after a greedy one reads its logits back";
        EXPECT_EQ(picked[0], first_largest(logits)) << "decode step " << i;
      }
    }
  }
}

// A top_candidates step gives each logits row's best kTopCandidates (or kWideTopCandidates) entries of the
// same step's rows, in Sampler's rank order (the larger logit first, the lower id among equal ones), without
// reading the rows back: a prompt's rows and decode steps, by default and under --deterministic.
TEST_F(GpuModelTest, TopCandidateStepsGiveEachRowsBestLogitsInRankOrder) {
  for (const auto& [K, deterministic] :
       {std::pair{GpuModel::kTopCandidates, false}, std::pair{GpuModel::kTopCandidates, true},
        std::pair{GpuModel::kWideTopCandidates, false}}) {
    SCOPED_TRACE(std::to_string(K) + (deterministic ? " deterministic" : " default"));
    const auto path =
        synth::write_preset(test::scratch_dir() / "gpu_model_top.gguf", "tiny", TensorType::Q8_0, 3);
    Rig rig(context(), path, kPages, 0, deterministic);
    const uint32_t V = rig.config.n_vocab;
    const auto expect_best = [&](std::span<const float> rows, const GpuModel::TopCandidates& top, size_t n) {
      ASSERT_EQ(top.ids.size(), n * K);
      ASSERT_EQ(top.logits.size(), n * K);
      ASSERT_EQ(top.per_row, K);
      for (size_t r = 0; r < n; ++r) {
        const std::span<const float> row = rows.subspan(r * V, V);
        std::vector<int32_t> order(V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        for (uint32_t i = 0; i < K; ++i) {
          ASSERT_EQ(top.ids[r * K + i], order[i]) << "row " << r << ", rank " << i;
          EXPECT_EQ(top.logits[r * K + i], row[order[i]]) << "row " << r << ", rank " << i;
        }
      }
    };
    const std::vector<float> rows = rig.step(kPrompt, 0);
    expect_best(rows, rig.top_step(kPrompt, 0, K), kPrompt.size());
    const auto P = static_cast<uint32_t>(kPrompt.size());
    for (uint32_t i = 0; i < 3; ++i) {
      const std::vector<int32_t> token{static_cast<int32_t>(20 + i)};
      const GpuModel::TopCandidates top = rig.top_step(token, P + i, K);
      const std::vector<int32_t> ids(top.ids.begin(), top.ids.end());
      const std::vector<float> best(top.logits.begin(), top.logits.end());
      const std::vector<float> logits = rig.step(token, P + i);
      ASSERT_EQ(logits.size(), V) << "a step after a top-candidates one reads its logits back";
      expect_best(logits, {ids, best, K}, 1);
    }
  }
}

// Decode steps' attention pulling the next products' weights into the L2 cache (a Custom plan: the tiny
// model's products are not the default plan's) changes no bit of the logits, by default and under
// --deterministic (whose batches take the decode pass too).
TEST_F(GpuModelTest, WeightsPrefetchedDuringAttentionChangeNoLogit) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_prefetch.gguf", "tiny", TensorType::Q8_0, 5);
  for (bool deterministic : {false, true}) {
    Rig plain(context(), path, kPages, [&](GpuModelOptions& o) {
      o.deterministic = deterministic;
      o.l2_prefetch = L2Prefetch::Off;
    });
    // The o weights with the start of gate and up (the Q4_0 plan's shape), and alone (the Q8_0 plan's).
    for (uint32_t ffn_mib : {1u, 0u}) {
      SCOPED_TRACE(std::string(deterministic ? "deterministic" : "default") + ", ffn_mib " +
                   std::to_string(ffn_mib));
      Rig prefetching(context(), path, kPages, [&](GpuModelOptions& o) {
        o.deterministic = deterministic;
        o.l2_prefetch = L2Prefetch::Custom;
        o.prefetch_plan = {.o = true, .ffn_mib = ffn_mib, .groups = 5};
      });
      expect_same_logits(plain, prefetching, {7, 8, 9});
    }
  }
}

// The default plan prefetches only for the products it was measured to win on, with 512 groups: Q4_0
// (device format Q4_0x8) with 32 MiB or more of gate and up, the o weights and 16 MiB (llama3-8b's 66 MB;
// llama3-1b's 19 MB lost); Q8_0 (Q8_0x8) with 64 MiB or more, the o weights alone (llama3-8b's 125 MB;
// llama3-1b's 36 MB moved within noise).
TEST(L2PrefetchRule, OnlyLargeQ4_0AndQ8_0Products) {
  const L2PrefetchPlan plan = auto_l2_prefetch(TensorType::Q4_0x8, TensorType::Q4_0x8, 66060288);
  EXPECT_EQ(plan, (L2PrefetchPlan{.o = true, .ffn_mib = 16, .groups = 512}));
  EXPECT_TRUE(plan.any());
  EXPECT_FALSE(auto_l2_prefetch(TensorType::Q4_0x8, TensorType::Q4_0x8, 18874368).any());
  const L2PrefetchPlan q8 = auto_l2_prefetch(TensorType::Q8_0x8, TensorType::Q8_0x8, 124780544);
  EXPECT_EQ(q8, (L2PrefetchPlan{.o = true, .ffn_mib = 0, .groups = 512}));
  EXPECT_TRUE(q8.any());
  EXPECT_FALSE(auto_l2_prefetch(TensorType::Q8_0x8, TensorType::Q8_0x8, 35651584).any());
  EXPECT_FALSE(auto_l2_prefetch(TensorType::Q4_K, TensorType::Q4_K, 66060288).any());
  EXPECT_FALSE(auto_l2_prefetch(TensorType::Q6_Kx8, TensorType::Q4_0x8, 66060288).any());
  EXPECT_FALSE(auto_l2_prefetch(TensorType::Q8_0x8, TensorType::Q4_0x8, 124780544).any());
}

// Batches of up to 32 tokens split attention by their context (32 positions a split below 1024, 64 below
// 2048, then 128): a sequence run past the first change gives the logits of one fixed split size, up to
// rounding, so the scratch, the grid and the replayed recordings follow the split.
TEST_F(GpuModelTest, AttentionSplitsFollowingTheContextMatchAFixedSplit) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_splits.gguf", "tiny", TensorType::F32, 7);
  constexpr uint32_t kLongPages = 70;  // 1120 positions
  Rig by_context(context(), path, kLongPages), fixed(context(), path, kLongPages, 32);
  std::vector<int32_t> chunk(16);  // logits for every token: at most max_sequences of them
  float worst = 0;
  auto run = [&](uint32_t first) {
    for (uint32_t i = 0; i < 16; ++i) chunk[i] = static_cast<int32_t>((first * 7 + i * 13) % 200 + 3);
    const std::vector<float> a = by_context.step(chunk, first), b = fixed.step(chunk, first);
    ASSERT_EQ(a.size(), b.size());
    float diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
    worst = std::max(worst, diff / std::max(max_abs(b), 1e-6f));
  };
  for (uint32_t first = 0; first + 16 <= kLongPages * 16; first += 16) run(first);
  // 17 splits of 32 positions (up to 527), then 17 of 64 (up to 1039): one recording must not stand in for
  // the other (the recordings are dropped first, so the 32-position one is made).
  by_context.model->set_profiling(false);
  run(512);
  run(1024);
  EXPECT_LT(worst, 1e-4f) << "largest difference relative to the logits' largest magnitude";
}

// --deterministic: a prompt of 300 tokens in one batch runs its attention in two blocks of tokens (256 and
// 44: the tiny model's partials are far inside GpuModel's scratch bound, so a block takes its most tokens)
// and gives the bits of the same prompt in steps of 32 tokens, for its last token and for a decode step
// after it. A K-quant model, so that the o product runs on matvec_q8 and attention also writes its output
// quantized (a view per block too). Both of --deterministic's attention paths: the decode pass with each
// token's own splits (positions from 128 on take several, merged by the last), and attention.comp in
// splits of 64 with the combine pass (decode_attention off, as on a device without subgroup arithmetic).
TEST_F(GpuModelTest, DeterministicAttentionInTokenBlocksGivesTheBitsOfSmallSteps) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_det_blocks.gguf", "tiny", TensorType::Q4_K, 9);
  constexpr uint32_t kPages300 = 20;  // 320 positions
  std::vector<int32_t> prompt(300);
  for (uint32_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 11) % 250 + 3);
  for (const bool decode_pass : {true, false}) {
    SCOPED_TRACE(decode_pass ? "the decode pass" : "attention.comp");
    Rig one(context(), path, kPages300, 0, true, 320, false, decode_pass),
        small(context(), path, kPages300, 0, true, 32, false, decode_pass);
    one.model->set_profiling(true);
    const std::vector<float> a = one.step(prompt, 0, 1);
    uint32_t decode_dispatches = 0, combines = 0;
    for (const vk::DispatchTime& t : one.model->last_dispatch_times()) {
      decode_dispatches += t.name->starts_with("attention_decode");
      combines += t.name->starts_with("attention_combine");
    }
    EXPECT_EQ(decode_dispatches, decode_pass ? 2 * one.config.n_layers : 0) << "two blocks a layer";
    EXPECT_EQ(combines, decode_pass ? 0 : 2 * one.config.n_layers);
    std::vector<float> b;
    for (uint32_t first = 0; first < prompt.size(); first += 32) {
      const auto n = std::min<size_t>(32, prompt.size() - first);
      b = small.step(std::span(prompt).subspan(first, n), first, 1);
    }
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a, b) << "the last prompt token's logits";
    const std::vector<int32_t> next{42};
    EXPECT_EQ(one.step(next, 300), small.step(next, 300)) << "a decode step after the prompt";
  }
}

// A decode step of float weights folds the norms, the SwiGLU and the residual adds into its products
// (kernels::matvec_fused), by default and under --deterministic; under --deterministic a prompt's batch takes
// the batched fused builds too, so that its tokens get the bits of one-token steps (checked below). Both give
// the reference's logits (EveryArchitectureAndTypeMatchesTheCpuReference checks the values).
TEST_F(GpuModelTest, FloatStepsFoldNormsSwigluAndResidualsIntoTheirProducts) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_fused.gguf", "tiny", TensorType::F16, 5);
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "--deterministic" : "default");
    Rig rig(context(), path, kPages, 0, deterministic);
    // The last step's fused one-token and batched products, and its unfused norms, adds and SwiGLUs.
    struct Counts {
      uint32_t fused = 0, fused_batched = 0, unfused = 0;
    };
    const auto count = [&] {
      Counts c;
      for (const vk::DispatchTime& t : rig.model->last_dispatch_times()) {
        if (t.name->starts_with("matvec1_norm_") || t.name->starts_with("matvec1_acc_")) ++c.fused;
        if (t.name->starts_with("matvec_norm_") || t.name->starts_with("matvec_acc_")) ++c.fused_batched;
        if (t.name->starts_with("rms_norm") || t.name->starts_with("add_") || t.name->starts_with("swiglu") ||
            t.name->starts_with("matvec1_swiglu_"))
          ++c.unfused;
      }
      return c;
    };
    const uint32_t layers = rig.config.n_layers;
    rig.model->set_profiling(true);
    rig.step(kPrompt, 0, 1);
    const Counts prompt = count();
    if (deterministic) {
      EXPECT_EQ(prompt.fused_batched, 4 * layers) << "the prompt's Q/K/V, o, gate/up and down a layer";
      EXPECT_EQ(prompt.fused, 1u) << "its logits (one row)";
      EXPECT_EQ(prompt.unfused, 0u);
    } else {
      EXPECT_EQ(prompt.fused + prompt.fused_batched, 0u)
          << "prompts take the tensor-core or batched products";
    }
    const std::vector<int32_t> next{42};
    rig.step(next, static_cast<uint32_t>(kPrompt.size()));
    const Counts decode = count();
    EXPECT_EQ(decode.fused, 4 * layers + 1) << "Q/K/V, o, gate/up and down a layer, and the logits";
    EXPECT_EQ(decode.unfused, 0u);
  }
}

// --deterministic with float weights (the fused products): a prompt in one batch, in batches of 3 and
// token by token gives the same bits for its last token's logits (also among the last 8 tokens' logits) and
// for a decode step after it.
TEST_F(GpuModelTest, DeterministicFloatStepsGiveTheBitsOfAnyBatch) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_det_float.gguf", "tiny", TensorType::BF16, 6);
  Rig whole(context(), path, kPages, 0, true), threes(context(), path, kPages, 0, true),
      ones(context(), path, kPages, 0, true);
  std::vector<int32_t> prompt(20);
  for (uint32_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 29 + 5) % 250 + 3);
  const auto in_steps = [&](Rig& rig, size_t step) {
    std::vector<float> last;
    for (size_t first = 0; first < prompt.size(); first += step) {
      const size_t n = std::min(step, prompt.size() - first);
      last = rig.step(std::span(prompt).subspan(first, n), static_cast<uint32_t>(first), 1);
    }
    return last;
  };
  const std::vector<float> a = in_steps(whole, prompt.size()), b = in_steps(threes, 3), c = in_steps(ones, 1);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << "the last prompt token's logits, batches of 3";
  EXPECT_EQ(a, c) << "the last prompt token's logits, one token a step";
  // The last 8 tokens' logits at once (the sampled rows' batched fused product): the last row is the same.
  Rig eight_rows(context(), path, kPages, 0, true);
  const std::vector<float> eight = eight_rows.step(prompt, 0, 8);
  ASSERT_EQ(eight.size(), a.size() * 8);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), eight.end() - static_cast<std::ptrdiff_t>(a.size())))
      << "the last prompt token's logits among the last 8 tokens'";
  const std::vector<int32_t> next{77};
  const std::vector<float> d = whole.step(next, 20);
  EXPECT_EQ(d, threes.step(next, 20)) << "a decode step after the prompt";
  EXPECT_EQ(d, ones.step(next, 20)) << "a decode step after the prompt";
}

// GPU only (VK_NV_cooperative_matrix2): a chunk of 48 tokens through one llama3-8b-sized layer with
// GpuModelOptions::coopmat2, whose feed-forward products are large enough for CoopMat2 (x converted to f16
// first), against the
// --deterministic forward (matvec, f32 x) of the same weights: the same logits within f16 rounding.
TEST_F(GpuModelTest, FeedForwardThroughCoopMat2MatchesTheDeterministicForward) {
  if (!kernels::coopmat2_takes(context().device(), TensorType::Q4_0x8) ||
      !kernels::coopmat_supported(context().device()))
    GTEST_SKIP() << "device " << context().device().info().name << " has no VK_NV_cooperative_matrix2 matmul";
  synth::SynthOptions so;
  so.shape = *synth::preset("llama3-8b", TensorType::Q4_0);
  so.shape.n_layers = 1;
  so.shape.n_vocab = synth::kByteVocabSize;
  so.type = TensorType::Q4_0;
  so.seed = 9;
  const auto path = test::scratch_dir() / "gpu_model_cm2.gguf";
  synth::write_model(path, so);
  Rig cm2(context(), path, kPages, 0, false, 64, true), exact(context(), path, kPages, 0, true, 64);
  std::vector<int32_t> chunk(48);
  for (uint32_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<int32_t>((i * 37) % 250 + 3);
  cm2.model->set_profiling(true);
  const std::vector<float> a = cm2.step(chunk, 0, 16), b = exact.step(chunk, 0, 16);
  uint32_t cm2_dispatches = 0;
  for (const vk::DispatchTime& t : cm2.model->last_dispatch_times())
    if (t.name->starts_with("matmul_cm2_")) ++cm2_dispatches;
  EXPECT_EQ(cm2_dispatches, 2u) << "the joined [gate; up] product and down should take CoopMat2";
  ASSERT_EQ(a.size(), b.size());
  float diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  EXPECT_LT(diff / std::max(max_abs(b), 1e-6f), 2e-2f) << "largest difference relative to the largest logit";
}

}  // namespace
}  // namespace kvtrie::engine
