// GpuModel's greedy steps submitted ahead (submit() / collect(), Batch::fed): a chain of steps whose
// tokens are the step before's greedy tokens, read on the device, picks the tokens that steps run one by
// one through forward() pick, for one sequence and for two decoding together (row t feeds token t), with
// the default path and under --deterministic; and the calls out of order are refused. On lavapipe with
// the validation layer, whose synchronization check sees the two steps in flight on one queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/synthetic/synthetic_model.h"
#include "cache/vk_page_store.h"
#include "runner/engine/gpu_model.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "tests/support/paths.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::engine {
namespace {

constexpr uint32_t kPagesPerSequence = 4;  // 16 tokens each: 64 positions a sequence
constexpr uint32_t kSteps = 7;             // decode steps after each prompt

const std::vector<std::vector<int32_t>> kPrompts{{1, 72, 101, 108, 108, 111, 44, 32, 119},
                                                 {1, 300, 5, 17, 250, 40, 47}};

// A tiny model on the GPU; sequence s owns pages s * kPagesPerSequence onwards.
struct Rig {
  GgufFile file;
  ModelConfig config;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<VkPageStore> pages;

  Rig(vk::Context& ctx, const std::filesystem::path& path, bool deterministic)
      : file(GgufFile::open(path)), config(ModelConfig::from_gguf(file)) {
    GpuModelOptions o;
    o.max_sequences = 2;
    o.max_context = kPagesPerSequence * 16;
    o.max_batch_tokens = 16;
    o.deterministic = deterministic;
    model = std::make_unique<GpuModel>(ctx, file, config, o);
    pages = std::make_unique<VkPageStore>(ctx, model->kv_layout(), 2 * kPagesPerSequence, 0);
    model->bind_pages(*pages);
  }

  // A greedy batch of sequences seqs[i] with tokens[i] at positions[i].. (a logits row each, its last).
  static Batch batch(const std::vector<uint32_t>& seqs, const std::vector<std::vector<int32_t>>& tokens,
                     const std::vector<uint32_t>& positions) {
    Batch b;
    b.greedy_only = true;
    for (uint32_t i = 0; i < seqs.size(); ++i) {
      std::vector<uint32_t> table(kPagesPerSequence);
      std::iota(table.begin(), table.end(), seqs[i] * kPagesPerSequence);
      const uint32_t seq = b.add_sequence(table);
      for (uint32_t j = 0; j < tokens[i].size(); ++j) {
        b.tokens.push_back(tokens[i][j]);
        b.positions.push_back(positions[i] + j);
        b.seq.push_back(seq);
      }
      b.logits_for.push_back(static_cast<uint32_t>(b.tokens.size() - 1));
    }
    return b;
  }

  // Each of the first `sequences` prompts alone through forward(): its greedy token.
  std::vector<int32_t> prefill(uint32_t sequences) {
    std::vector<int32_t> first;
    for (uint32_t s = 0; s < sequences; ++s) {
      EXPECT_TRUE(model->forward(batch({s}, {kPrompts[s]}, {0})).empty());
      first.push_back(model->greedy_tokens()[0]);
    }
    return first;
  }

  // Decode step `step` after the prompts of sequences 0, 1, ..: sequence s takes tokens[s].
  static Batch decode(const std::vector<int32_t>& tokens, uint32_t step) {
    std::vector<uint32_t> seqs;
    std::vector<std::vector<int32_t>> each;
    std::vector<uint32_t> positions;
    for (uint32_t s = 0; s < tokens.size(); ++s) {
      seqs.push_back(s);
      each.push_back({tokens[s]});
      positions.push_back(static_cast<uint32_t>(kPrompts[s].size()) + step);
    }
    return batch(seqs, each, positions);
  }
};

// kSteps greedy decode steps, each through forward(): the tokens of every step, sequence by sequence.
std::vector<std::vector<int32_t>> one_by_one(Rig& rig, uint32_t sequences) {
  std::vector<int32_t> tokens = rig.prefill(sequences);
  std::vector<std::vector<int32_t>> picked{tokens};
  for (uint32_t i = 0; i < kSteps; ++i) {
    EXPECT_TRUE(rig.model->forward(Rig::decode(tokens, i)).empty());
    const std::span<const int32_t> next = rig.model->greedy_tokens();
    tokens.assign(next.begin(), next.end());
    picked.push_back(tokens);
  }
  return picked;
}

// The same steps submitted ahead: step i + 1 (fed) goes in while step i runs, then step i is collected.
std::vector<std::vector<int32_t>> ahead(Rig& rig, uint32_t sequences) {
  const std::vector<int32_t> first = rig.prefill(sequences);
  std::vector<std::vector<int32_t>> picked{first};
  rig.model->submit(Rig::decode(first, 0));
  for (uint32_t i = 1; i <= kSteps; ++i) {
    if (i < kSteps) {
      Batch fed = Rig::decode(std::vector<int32_t>(sequences, 0), i);  // placeholders
      fed.fed = true;
      rig.model->submit(fed);
      EXPECT_EQ(rig.model->in_flight(), 2u);
    }
    const std::span<const int32_t> tokens = rig.model->collect();
    picked.emplace_back(tokens.begin(), tokens.end());
  }
  EXPECT_EQ(rig.model->in_flight(), 0u);
  return picked;
}

class GpuModelAheadTest : public test::VulkanTest {};

TEST_F(GpuModelAheadTest, FedStepsPickTheTokensOfStepsRunOneByOne) {
  for (bool deterministic : {false, true}) {
    for (TensorType type : {TensorType::Q8_0, TensorType::F16}) {
      const auto path = synth::write_preset(test::scratch_dir() / "gpu_model_ahead.gguf", "tiny", type, 5);
      for (uint32_t sequences : {1u, 2u}) {
        SCOPED_TRACE(std::string(tensor_type_info(type).name) + ", " + std::to_string(sequences) +
                     " sequences" + (deterministic ? ", deterministic" : ""));
        Rig plain(context(), path, deterministic);
        const auto expected = one_by_one(plain, sequences);
        Rig chained(context(), path, deterministic);
        const auto got = ahead(chained, sequences);
        EXPECT_EQ(got, expected);
        // The tokens change along the chain (a chain that fed back a constant would match only by luck).
        std::vector<int32_t> seen;
        for (const auto& step : expected) seen.push_back(step[0]);
        std::sort(seen.begin(), seen.end());
        EXPECT_GT(std::unique(seen.begin(), seen.end()) - seen.begin(), 1);
      }
    }
  }
}

TEST_F(GpuModelAheadTest, CallsOutOfOrderAreRefused) {
  const auto path =
      synth::write_preset(test::scratch_dir() / "gpu_model_ahead.gguf", "tiny", TensorType::Q8_0, 5);
  Rig rig(context(), path, false);
  const std::vector<int32_t> first = rig.prefill(1);
  Batch fed = Rig::decode({0}, 0);
  fed.fed = true;
  EXPECT_THROW(rig.model->submit(fed), Error) << "a fed step needs a greedy step in flight";
  EXPECT_THROW(rig.model->collect(), Error) << "nothing in flight";
  Batch rows = Rig::decode(first, 0);
  rows.greedy_only = false;
  EXPECT_THROW(rig.model->submit(rows), Error) << "submit() takes greedy steps";
  rig.model->submit(Rig::decode(first, 0));
  EXPECT_THROW(rig.model->forward(Rig::decode(first, 1)), Error) << "forward() with a step in flight";
  Batch two = Rig::decode({0, 0}, 1);  // two rows fed from a step of one
  two.fed = true;
  EXPECT_THROW(rig.model->submit(two), Error) << "a fed token needs its row";
  fed = Rig::decode({0}, 1);
  fed.fed = true;
  rig.model->submit(fed);
  EXPECT_THROW(rig.model->submit(fed), Error) << "kMaxInFlight steps in flight";
  rig.model->collect();
  rig.model->collect();
  EXPECT_EQ(rig.model->in_flight(), 0u);
}

}  // namespace
}  // namespace kvtrie::engine
