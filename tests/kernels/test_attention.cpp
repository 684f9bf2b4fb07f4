// Paged causal GQA attention against a plain C++ reference: several sequences of different lengths in one
// batch, page tables out of order, a page shared by two sequences, GQA ratios 1, 2, 3, 4, 8 and 24 (more
// heads than one work group takes), head dims 8, 10 and 12 (rows that are not 16-byte aligned), 64, 128 and
// 256, a pool split over several bindings, splits of the context (split-K, splits that cut pages and key
// tiles) and a single split. The batch mixes a 16-token prefill block of one sequence (causal masking inside
// the block), decode tokens of other sequences, a run whose positions are out of order and a long context
// crossing split boundaries. Batch invariance: a token gives the same bits alone, inside its prefill block
// alone, in the mixed batch and in the batch reversed.
//
// Tolerance: K and V are f16 values read exactly by both sides; the reference computes the softmax in
// double, so the GPU's f32 exp/accumulation error remains: |gpu - ref| <= 2e-5 + 2e-4 * max |ref| per
// head (outputs are convex combinations of values in [-1, 1]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops/attention.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/vk/command_recorder.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

struct Shape {
  uint32_t n_heads, n_kv_heads, head_dim;
};

struct Sequence {
  std::vector<uint32_t> pages;  // its page table
  uint32_t length;              // positions written
};

struct Batch {
  std::vector<uint32_t> page_table;  // all sequences' tables, concatenated
  std::vector<uint32_t> token_info;  // (offset in page_table, position) per token
  std::vector<float> q;
  uint32_t tokens = 0;
  uint32_t max_position = 0;
};

constexpr uint32_t kPageTokens = 16;
constexpr uint32_t kLayers = 2;
constexpr uint32_t kLayer = 1;  // not layer 0: the layer offset inside a page is exercised
constexpr uint32_t kPages = 16;
constexpr uint32_t kLongPages = 132;  // sequence E's: pages kPages.. of a pool made for it

class AttentionDecodeKeyLanes : public test::VulkanTest {};

class AttentionTest : public test::VulkanTest, public ::testing::WithParamInterface<Shape> {
 protected:
  bool decode_ = false;                         // run() asks for the decode pass (AttentionArgs::decode)
  const vk::Buffer* split_counters_ = nullptr;  // ... and its merge by the last split (split_counters)
  uint32_t key_lanes_ = 1;                      // ... with this many lanes a key (decode_key_lanes)

  KvLayout layout() const { return {kLayers, kPageTokens, GetParam().n_kv_heads * GetParam().head_dim}; }

  // out[t][h][d] = sum_j softmax_j(q . k_j / sqrt(hd)) v_j[d] over positions j <= pos of t's sequence.
  std::vector<double> reference(const Batch& b, const std::vector<uint16_t>& pool) const {
    const Shape s = GetParam();
    const KvLayout l = layout();
    const uint32_t width = s.n_heads * s.head_dim;
    std::vector<double> out(uint64_t{b.tokens} * width);
    for (uint32_t t = 0; t < b.tokens; ++t) {
      const uint32_t off = b.token_info[2 * t], pos = b.token_info[2 * t + 1];
      for (uint32_t h = 0; h < s.n_heads; ++h) {
        const uint32_t kh = h / (s.n_heads / s.n_kv_heads);
        auto at = [&](uint32_t j, bool value, uint32_t d) {
          const uint32_t page = b.page_table[off + j / kPageTokens];
          return double{fp16_to_fp32(
              pool[l.offset_elements(page, kLayer, value, j % kPageTokens, kh * s.head_dim + d)])};
        };
        std::vector<double> score(pos + 1);
        for (uint32_t j = 0; j <= pos; ++j) {
          double dot = 0;
          for (uint32_t d = 0; d < s.head_dim; ++d)
            dot += double{b.q[uint64_t{t} * width + h * s.head_dim + d]} * at(j, false, d);
          score[j] = dot / std::sqrt(double(s.head_dim));
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& v : score) sum += (v = std::exp(v - mx));
        for (uint32_t d = 0; d < s.head_dim; ++d) {
          double acc = 0;
          for (uint32_t j = 0; j <= pos; ++j) acc += score[j] * at(j, true, d);
          out[uint64_t{t} * width + h * s.head_dim + d] = acc / sum;
        }
      }
    }
    return out;
  }

  // pools: the page pool in one buffer, or in several of pages_per_binding pages each.
  // The arguments of a run of b (views and scratch left empty).
  AttentionArgs args_of(const Batch& b, uint32_t split_size, bool tensor_cores) const {
    const Shape s = GetParam();
    AttentionArgs a;
    a.tokens = b.tokens;
    a.n_heads = s.n_heads;
    a.n_kv_heads = s.n_kv_heads;
    a.head_dim = s.head_dim;
    a.layout = layout();
    a.layer = kLayer;
    a.max_position = b.max_position;
    a.split_size = split_size;
    a.tensor_cores = tensor_cores;
    a.decode = decode_;
    a.decode_key_lanes = key_lanes_;
    return a;
  }

  // With `quantized`, the combine pass also writes out quantized into those buffers (stride: one token's
  // values). With `half`, it writes out as f16 into *half instead (and nothing is returned).
  std::vector<float> run(const Batch& b, const std::vector<const vk::Buffer*>& pools, uint32_t split_size,
                         uint32_t pages_per_binding = 0, bool tensor_cores = false,
                         const std::optional<QuantizedX>& quantized = std::nullopt,
                         std::vector<uint16_t>* half = nullptr) {
    const Shape s = GetParam();
    Kernels k(context(), Prewarm::No);
    vk::Buffer qb = device_buffer(b.q);
    vk::Buffer pt = device_buffer(b.page_table);
    vk::Buffer ti = device_buffer(b.token_info);
    AttentionArgs a = args_of(b, split_size, tensor_cores);
    vk::Buffer scratch(context().device(), attention_scratch_bytes(a), vk::MemoryKind::DeviceLocal);
    const uint64_t out_count = uint64_t{b.tokens} * s.n_heads * s.head_dim;
    vk::Buffer out(context().device(), out_count * sizeof(float), vk::MemoryKind::DeviceLocal);
    a.q = qb.view();
    a.kv_pages = pools[0]->view();
    for (size_t i = 1; i < pools.size(); ++i) a.kv_pages_more[i - 1] = pools[i]->view();
    a.pages_per_binding = pages_per_binding;
    a.page_table = pt.view();
    a.token_info = ti.view();
    a.scratch = scratch.view();
    a.out = out.view();
    a.quantized_out = quantized;
    a.half_out = half != nullptr;
    if (split_counters_) a.split_counters = split_counters_->view();
    vk::CommandRecorder rec(context());
    rec.begin();
    attention(rec, k, a);
    rec.end();
    rec.submit_and_wait();
    if (half != nullptr) {
      *half = read_back<uint16_t>(out, out_count);
      return {};
    }
    return read_back<float>(out, out_count);
  }

  // Four sequences: A (40 positions, pages 7 2 9), B (23 positions, pages 7 4: it shares A's first page,
  // as a common prefix does), C (5 positions, page 11), D (100 positions, pages 13 0 15 1 3 5 14); and E
  // (2,112 positions on the kLongPages pages past kPages, last first), only in a pool made for it.
  static std::vector<Sequence> sequences() {
    std::vector<uint32_t> long_pages(kLongPages);
    std::iota(long_pages.rbegin(), long_pages.rend(), kPages);
    return {{{7, 2, 9}, 40},
            {{7, 4}, 23},
            {{11}, 5},
            {{13, 0, 15, 1, 3, 5, 14}, 100},
            {long_pages, kLongPages * kPageTokens}};
  }

  // A batch of (sequence, position) queries with random q.
  Batch make_batch(const std::vector<std::pair<uint32_t, uint32_t>>& queries) {
    Batch b;
    std::vector<uint32_t> offsets;
    for (const Sequence& s : sequences()) {
      offsets.push_back(static_cast<uint32_t>(b.page_table.size()));
      b.page_table.insert(b.page_table.end(), s.pages.begin(), s.pages.end());
    }
    for (auto [seq, pos] : queries) {
      b.token_info.push_back(offsets[seq]);
      b.token_info.push_back(pos);
      b.max_position = std::max(b.max_position, pos);
    }
    b.tokens = static_cast<uint32_t>(queries.size());
    b.q = random_floats(uint64_t{b.tokens} * GetParam().n_heads * GetParam().head_dim);
    return b;
  }

  // The 16-token prefill block of A (positions 24..39): tokens 0..15 of the mixed batch.
  static std::vector<std::pair<uint32_t, uint32_t>> prefill_block() {
    std::vector<std::pair<uint32_t, uint32_t>> q;
    for (uint32_t pos = 24; pos < 40; ++pos) q.push_back({0, pos});
    return q;
  }

  // The prefill block, decode tokens of B, C and D, A again (a new run), a run of D with positions out of
  // order, short contexts, and a second prefill run of D that straddles aligned block boundaries.
  Batch make_batch() {
    std::vector<std::pair<uint32_t, uint32_t>> q = prefill_block();
    const std::vector<std::pair<uint32_t, uint32_t>> rest = {
        {1, 22}, {2, 4}, {3, 99}, {0, 20}, {3, 97}, {3, 60}, {3, 98}, {3, 33}, {1, 16}, {0, 0}, {2, 0}};
    q.insert(q.end(), rest.begin(), rest.end());
    for (uint32_t pos = 70; pos < 83; ++pos) q.push_back({3, pos});
    return make_batch(q);
  }

  // Token t of b alone in a batch of its own (same page table).
  Batch token_of(const Batch& b, uint32_t t) const {
    const uint32_t width = GetParam().n_heads * GetParam().head_dim;
    Batch one;
    one.page_table = b.page_table;
    one.token_info = {b.token_info[2 * t], b.token_info[2 * t + 1]};
    one.q.assign(b.q.begin() + uint64_t{t} * width, b.q.begin() + uint64_t{t + 1} * width);
    one.tokens = 1;
    one.max_position = one.token_info[1];
    return one;
  }

  // Tokens [first, first + count) of b as a batch of their own, in reverse order when `reverse`.
  Batch tokens_of(const Batch& b, uint32_t first, uint32_t count, bool reverse) const {
    const uint32_t width = GetParam().n_heads * GetParam().head_dim;
    Batch out;
    out.page_table = b.page_table;
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t t = reverse ? first + count - 1 - i : first + i;
      out.token_info.push_back(b.token_info[2 * t]);
      out.token_info.push_back(b.token_info[2 * t + 1]);
      out.max_position = std::max(out.max_position, b.token_info[2 * t + 1]);
      out.q.insert(out.q.end(), b.q.begin() + uint64_t{t} * width, b.q.begin() + uint64_t{t + 1} * width);
    }
    out.tokens = count;
    return out;
  }

  // The quantized copy `got` of `out` (tokens rows) holds what quantize_q8 makes of out, bit for bit.
  void expect_quantized_as_quantize_q8(const std::vector<float>& out, uint32_t tokens,
                                       const QuantizedBuffers& got) {
    const uint32_t width = GetParam().n_heads * GetParam().head_dim;
    const uint64_t values = uint64_t{tokens} * width;
    const QuantizedBuffers want(context().device(), tokens, width, false);
    vk::Buffer ob = device_buffer(out);
    Kernels k(context(), Prewarm::No);
    vk::CommandRecorder rec(context());
    rec.begin();
    QuantizeQ8Args q;
    q.x = ob.view();
    q.tokens = tokens;
    q.cols = width;
    q.out = want.view();
    quantize_q8(rec, k, q);
    rec.end();
    rec.submit_and_wait();
    EXPECT_EQ(read_back<uint8_t>(got.bytes, values), read_back<uint8_t>(want.bytes, values));
    EXPECT_EQ(read_back<uint32_t>(got.scales, values / 8), read_back<uint32_t>(want.scales, values / 8));
  }

  std::vector<uint16_t> make_pool(uint32_t pages = kPages) {
    const std::vector<float> values = random_floats(layout().page_elements() * pages);
    std::vector<uint16_t> pool(values.size());
    std::transform(values.begin(), values.end(), pool.begin(), fp32_to_fp16);
    return pool;
  }
};

// |got - ref| <= 2e-5 + rel * max |ref| per head (rel 2e-4: f32 throughout, see the top of the file).
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, uint32_t head_dim,
                  double rel = 2e-4) {
  ASSERT_EQ(got.size(), ref.size());
  int bad = 0;
  for (size_t h0 = 0; h0 < ref.size() && bad < 5; h0 += head_dim) {
    double mx = 0;
    for (size_t i = h0; i < h0 + head_dim; ++i) mx = std::max(mx, std::abs(ref[i]));
    for (size_t i = h0; i < h0 + head_dim && bad < 5; ++i)
      if (!(std::abs(got[i] - ref[i]) <= 2e-5 + rel * mx)) {
        ADD_FAILURE() << "out[" << i << "] = " << got[i] << ", reference " << ref[i];
        ++bad;
      }
  }
}

TEST_P(AttentionTest, MatchesReferenceWithAndWithoutSplits) {
  const Batch b = make_batch();
  const std::vector<uint16_t> pool_host = make_pool();
  vk::Buffer pool = device_buffer(pool_host);
  const std::vector<double> ref = reference(b, pool_host);
  // 7: splits that cut pages and key tiles; 48: a split of one and a half tiles; 256: one split per token.
  for (uint32_t split : {7u, 48u, 256u}) {
    SCOPED_TRACE("split_size " + std::to_string(split));
    expect_close(run(b, {&pool}, split), ref, GetParam().head_dim);
  }
}

// A pool split over three bindings of 6 pages (as for a pool larger than maxStorageBufferRange): the
// sequences' pages live in all three. Same bits as the single binding.
TEST_P(AttentionTest, PoolSplitOverBindingsGivesTheSameBits) {
  const Batch b = make_batch();
  const std::vector<uint16_t> pool_host = make_pool();
  const uint64_t page = layout().page_elements();
  std::vector<vk::Buffer> chunks;
  for (uint64_t first = 0; first < kPages; first += 6) {
    const uint64_t n = std::min<uint64_t>(6, kPages - first);
    chunks.push_back(device_buffer(
        std::vector<uint16_t>(pool_host.begin() + first * page, pool_host.begin() + (first + n) * page)));
  }
  vk::Buffer whole = device_buffer(pool_host);
  const std::vector<float> one = run(b, {&whole}, 16);
  const std::vector<float> split = run(b, {&chunks[0], &chunks[1], &chunks[2]}, 16, 6);
  expect_close(split, reference(b, pool_host), GetParam().head_dim);
  EXPECT_EQ(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)), 0);
}

// The --deterministic contract: a token's bits do not depend on its batch. Compared: the mixed batch, the
// same batch reversed (every block and run is cut differently), the prefill block alone (forwards and
// reversed), and single tokens alone.
TEST_P(AttentionTest, TokenGivesTheSameBitsAloneInItsBlockAndInAnyBatch) {
  const Batch b = make_batch();
  vk::Buffer pool = device_buffer(make_pool());
  const uint32_t split = 16;
  const uint32_t width = GetParam().n_heads * GetParam().head_dim;
  const std::vector<float> batch = run(b, {&pool}, split);
  auto same = [&](const float* got, uint32_t t) {
    return std::memcmp(got, batch.data() + uint64_t{t} * width, width * sizeof(float)) == 0;
  };

  const std::vector<float> reversed = run(tokens_of(b, 0, b.tokens, true), {&pool}, split);
  for (uint32_t t = 0; t < b.tokens; ++t)
    EXPECT_TRUE(same(reversed.data() + uint64_t{b.tokens - 1 - t} * width, t))
        << "token " << t << " reversed";

  const uint32_t block = static_cast<uint32_t>(prefill_block().size());
  for (bool reverse : {false, true}) {
    const std::vector<float> alone_block = run(tokens_of(b, 0, block, reverse), {&pool}, split);
    for (uint32_t t = 0; t < block; ++t) {
      const uint32_t at = reverse ? block - 1 - t : t;
      EXPECT_TRUE(same(alone_block.data() + uint64_t{at} * width, t))
          << "token " << t << " in its prefill block alone" << (reverse ? ", reversed" : "");
    }
  }

  // First, middle and last of the prefill block, a long decode, out-of-order D tokens, short contexts.
  for (uint32_t t : {0u, 7u, 15u, 18u, 20u, 22u, 25u, 26u, b.tokens - 1}) {
    const std::vector<float> alone = run(token_of(b, t), {&pool}, split);
    EXPECT_TRUE(same(alone.data(), t)) << "token " << t << " differs alone vs in the batch";
  }
}

// The combine pass writes the o projection's input quantized as well: equal, bit for bit, to quantize_q8 of
// the floats it writes, which themselves are unchanged.
TEST_P(AttentionTest, QuantizedOutputEqualsQuantizingTheOutput) {
  const uint32_t width = GetParam().n_heads * GetParam().head_dim;
  if (GetParam().head_dim % 16 != 0)
    GTEST_SKIP() << "head_dim " << GetParam().head_dim
                 << ": a quantized output needs whole groups of 16 a head";
  const Batch b = make_batch();
  vk::Buffer pool = device_buffer(make_pool());
  const vk::Device& dev = context().device();
  const uint64_t values = uint64_t{b.tokens} * width;
  const QuantizedBuffers got(dev, b.tokens, width, false);
  const std::vector<float> plain = run(b, {&pool}, 16);
  const std::vector<float> out = run(b, {&pool}, 16, 0, false, got.view());
  EXPECT_EQ(std::memcmp(plain.data(), out.data(), values * sizeof(float)), 0);

  expect_quantized_as_quantize_q8(out, b.tokens, got);
}

// The combine pass writes out as f16 for a tensor-core o projection: the host's round-to-nearest-even of the
// floats the plain pass writes, bit for bit (convert_f16 makes the same, test_add.cpp).
TEST_P(AttentionTest, HalfOutputIsTheF16OfTheOutput) {
  if (GetParam().head_dim % 2 != 0) GTEST_SKIP() << "an f16 output takes pairs of values";
  const Batch b = make_batch();
  vk::Buffer pool = device_buffer(make_pool());
  const std::vector<float> plain = run(b, {&pool}, 16);
  std::vector<uint16_t> half;
  run(b, {&pool}, 16, 0, false, std::nullopt, &half);
  ASSERT_EQ(half.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i)
    ASSERT_EQ(half[i], fp32_to_fp16(plain[i])) << i << ": " << plain[i];
}

// The decode pass (attention_decode; tokens each alone in their sequence, as in a decode step of four
// sequences): against the reference with splits (the pass writes partials, and the combine pass or the last
// split to finish merges them; splits that cut pages and key blocks) and with one split (the pass writes the
// output itself), and its
// outputs for the o product: f16 the host's rounding of the f32 output, the quantized copy quantize_q8's of
// it.
TEST_P(AttentionTest, DecodePassMatchesReferenceAndWritesEveryOutput) {
  if (GetParam().head_dim % 8 != 0)
    GTEST_SKIP() << "head_dim " << GetParam().head_dim
                 << " runs attention.comp (the decode pass reads K in 16 bytes)";
  decode_ = true;
  const Batch b = make_batch({{1, 22}, {2, 4}, {3, 99}, {0, 39}});
  ASSERT_TRUE(attention_uses_decode_pass(context().device(), args_of(b, 48, false)))
      << context().device().info().name << " has no subgroup arithmetic and shuffles";
  const std::vector<uint16_t> pool_host = make_pool();
  vk::Buffer pool = device_buffer(pool_host);
  const std::vector<double> ref = reference(b, pool_host);
  // The merge by the last split: a word per token and KV head (4 heads a work group at most here), zero.
  vk::Buffer counters = device_buffer(std::vector<uint32_t>(b.tokens * GetParam().n_heads, 0));
  // 7, 48: partials and the combine pass, or the merge by the last split; 256: one split, the output written
  // by the decode pass.
  for (auto [split, merged] : {std::pair{7u, false}, {48u, false}, {256u, false}, {7u, true}, {48u, true}}) {
    SCOPED_TRACE("split_size " + std::to_string(split) + (merged ? ", merged by the last split" : ""));
    split_counters_ = merged ? &counters : nullptr;
    const std::vector<float> out = run(b, {&pool}, split);
    expect_close(out, ref, GetParam().head_dim);

    std::vector<uint16_t> half;
    run(b, {&pool}, split, 0, false, std::nullopt, &half);
    ASSERT_EQ(half.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(half[i], fp32_to_fp16(out[i])) << i << ": " << out[i];

    if (GetParam().head_dim % 16 != 0) continue;  // a quantized output takes whole groups of 16 a head
    const uint32_t width = GetParam().n_heads * GetParam().head_dim;
    const QuantizedBuffers got(context().device(), b.tokens, width, false);
    EXPECT_EQ(run(b, {&pool}, split, 0, false, got.view()), out);
    expect_quantized_as_quantize_q8(out, b.tokens, got);
  }
  // Every merge left its counter at zero for the next call.
  for (uint32_t c : read_back<uint32_t>(counters, b.tokens * GetParam().n_heads)) EXPECT_EQ(c, 0u);
}

// --deterministic's attention: the decode pass with each token's own splits (split_size 0), 128 positions
// below position 2048 and 256 from it, merged by the token's last split (or written by its only one).
// Against the reference, and the same bits for a token alone, in the batch and in the batch reversed: its
// prefill block of E crosses 2048, so that one dispatch mixes both split sizes and single-split tokens.
TEST_P(AttentionTest, PositionSplitsMatchReferenceAndGiveAnyBatchTheSameBits) {
  if (GetParam().head_dim % 8 != 0)
    GTEST_SKIP() << "head_dim " << GetParam().head_dim
                 << " runs attention.comp (the decode pass reads K in 16 bytes)";
  decode_ = true;
  std::vector<std::pair<uint32_t, uint32_t>> queries;
  for (uint32_t pos = 2040; pos < 2056; ++pos) queries.push_back({4, pos});
  for (auto q :
       {std::pair<uint32_t, uint32_t>{4, 2111}, {4, 600}, {4, 128}, {4, 127}, {3, 99}, {0, 20}, {2, 0}})
    queries.push_back(q);
  const Batch b = make_batch(queries);
  ASSERT_TRUE(attention_uses_decode_pass(context().device(), args_of(b, 0, false)))
      << context().device().info().name << " has no subgroup arithmetic and shuffles";
  ASSERT_EQ(attention_max_splits(b.max_position, 0), 16u);  // 2047: 16 splits of 128
  const std::vector<uint16_t> pool_host = make_pool(kPages + kLongPages);
  vk::Buffer pool = device_buffer(pool_host);
  vk::Buffer counters = device_buffer(std::vector<uint32_t>(b.tokens * GetParam().n_heads, 0));
  split_counters_ = &counters;
  const std::vector<float> out = run(b, {&pool}, 0);
  expect_close(out, reference(b, pool_host), GetParam().head_dim);

  const uint32_t width = GetParam().n_heads * GetParam().head_dim;
  auto same = [&](const float* got, uint32_t t) {
    return std::memcmp(got, out.data() + uint64_t{t} * width, width * sizeof(float)) == 0;
  };
  const std::vector<float> reversed = run(tokens_of(b, 0, b.tokens, true), {&pool}, 0);
  for (uint32_t t = 0; t < b.tokens; ++t)
    EXPECT_TRUE(same(reversed.data() + uint64_t{b.tokens - 1 - t} * width, t))
        << "token " << t << " reversed";
  // Positions 2040, 2047 and 2048 of the block, 2111, 600, 128, 127 and 0.
  for (uint32_t t : {0u, 7u, 8u, 16u, 17u, 18u, 19u, b.tokens - 1}) {
    const std::vector<float> alone = run(token_of(b, t), {&pool}, 0);
    EXPECT_TRUE(same(alone.data(), t)) << "token " << t << " differs alone vs in the batch";
  }
  if (GetParam().head_dim % 16 == 0) {  // the quantized copy for the o product, beside the same floats
    const QuantizedBuffers got(context().device(), b.tokens, width, false);
    EXPECT_EQ(run(b, {&pool}, 0, 0, false, got.view()), out);
    expect_quantized_as_quantize_q8(out, b.tokens, got);
  }
  for (uint32_t c : read_back<uint32_t>(counters, b.tokens * GetParam().n_heads)) EXPECT_EQ(c, 0u);
}

// The decode pass with 2 and 4 lanes scoring each key (KEY_LANES), and with those its split size gives
// (decode_key_lanes 0): against the reference with splits merged by the last split (7 positions: splits
// shorter than a block; 48: cutting pages and blocks) and with one split, and the same bits for a token
// alone as in the batch.
TEST_P(AttentionTest, DecodePassWithLanesSharingAKeyMatchesReferenceAndIsBatchInvariant) {
  const uint32_t hd = GetParam().head_dim, sg = context().device().info().subgroup_size;
  if (hd % 16 != 0) GTEST_SKIP() << "head_dim " << hd << " is not split in two parts of 16-byte pieces";
  decode_ = true;
  const Batch b = make_batch({{1, 22}, {2, 4}, {3, 99}, {0, 39}});
  ASSERT_TRUE(attention_uses_decode_pass(context().device(), args_of(b, 48, false)))
      << context().device().info().name << " has no subgroup arithmetic and shuffles";
  const std::vector<uint16_t> pool_host = make_pool();
  vk::Buffer pool = device_buffer(pool_host);
  const std::vector<double> ref = reference(b, pool_host);
  vk::Buffer counters = device_buffer(std::vector<uint32_t>(b.tokens * GetParam().n_heads, 0));
  const uint32_t width = GetParam().n_heads * hd;
  for (uint32_t lanes : {0u, 2u, 4u}) {
    if (lanes && (hd % (8 * lanes) != 0 || lanes > sg)) continue;  // head_dim 16: not in 4 parts of 16 bytes
    SCOPED_TRACE(lanes ? std::to_string(lanes) + " lanes a key" : "lanes a key by split size");
    key_lanes_ = lanes;
    for (auto [split, merged] : {std::pair{7u, true}, {48u, true}, {256u, false}}) {
      SCOPED_TRACE("split_size " + std::to_string(split));
      split_counters_ = merged ? &counters : nullptr;
      const std::vector<float> out = run(b, {&pool}, split);
      expect_close(out, ref, hd);
      for (uint32_t t = 0; t < b.tokens; ++t) {
        const std::vector<float> alone = run(token_of(b, t), {&pool}, split);
        EXPECT_EQ(std::memcmp(alone.data(), out.data() + uint64_t{t} * width, width * sizeof(float)), 0)
            << "token " << t << " differs alone vs in the batch";
      }
    }
  }
  for (uint32_t c : read_back<uint32_t>(counters, b.tokens * GetParam().n_heads)) EXPECT_EQ(c, 0u);
}

// By default a split shorter than the decode pass's work group (8 subgroups) takes 2 lanes a key, so that
// every lane scores; a longer one, a token's own splits (split_size 0) and a head_dim not in two halves of
// 16-byte pieces take 1.
TEST_F(AttentionDecodeKeyLanes, AreTwoForSplitsShorterThanTheWorkGroup) {
  const uint32_t lanes = 8 * context().device().info().subgroup_size;
  EXPECT_EQ(attention_decode_key_lanes(context().device(), 1, 128), 2u);
  EXPECT_EQ(attention_decode_key_lanes(context().device(), lanes - 1, 64), 2u);
  EXPECT_EQ(attention_decode_key_lanes(context().device(), lanes, 128), 1u);
  EXPECT_EQ(attention_decode_key_lanes(context().device(), 4 * lanes, 128), 1u);
  EXPECT_EQ(attention_decode_key_lanes(context().device(), 0, 128), 1u);
  EXPECT_EQ(attention_decode_key_lanes(context().device(), 1, 24), 1u);
}

// A token's splits under split_size 0: an 8th of its positions as a power of two, 128 to 512; the most of
// any position up to max_position sizes the grid and the scratch.
TEST(AttentionPositionSplits, FollowTheTokensPositionAndBoundTheGrid) {
  EXPECT_EQ(attention_position_split(0), 128u);
  EXPECT_EQ(attention_position_split(2047), 128u);
  EXPECT_EQ(attention_position_split(2048), 256u);
  EXPECT_EQ(attention_position_split(4095), 256u);
  EXPECT_EQ(attention_position_split(4096), 512u);
  EXPECT_EQ(attention_position_split(1u << 30), 512u);
  for (auto [max_position, splits] : {std::pair<uint32_t, uint32_t>{0, 1},
                                      {127, 1},
                                      {128, 2},
                                      {2047, 16},
                                      {2048, 16},
                                      {4095, 16},
                                      {8191, 16},
                                      {8192, 17},
                                      {32767, 64}}) {
    uint32_t most = 0;
    for (uint32_t p = 0; p <= max_position; ++p) most = std::max(most, p / attention_position_split(p) + 1);
    EXPECT_EQ(most, splits) << max_position;
    EXPECT_EQ(attention_max_splits(max_position, 0), splits) << max_position;
  }
  EXPECT_EQ(attention_max_splits(4095, 64), 64u);
}

// The split pass on tensor cores (attention_coopmat; GPU only: lavapipe has no cooperative matrices): the
// mixed batch plus a 64-token prefill run of D (positions 36..99: several work groups' tokens, crossing
// pages, key tiles and splits) against the reference, with and without splits (one split: the pass writes the
// output itself, f32 and f16, and no combine pass runs). q and the probabilities are f16 there, so the
// tolerance is 3e-3 of the head's largest output (f16 keeps 11 bits), 4e-3 for the f16 output.
TEST_P(AttentionTest, TensorCoresMatchReferenceWhereTheDeviceHasThem) {
  std::vector<std::pair<uint32_t, uint32_t>> queries = prefill_block();
  for (uint32_t pos = 36; pos < 100; ++pos) queries.push_back({3, pos});
  for (auto q : {std::pair<uint32_t, uint32_t>{1, 22}, {2, 4}, {3, 99}, {0, 20}, {1, 16}, {0, 0}})
    queries.push_back(q);
  const Batch b = make_batch(queries);
  AttentionArgs probe = args_of(b, 48, true);
  if (!attention_uses_tensor_cores(context().device(), probe))
    GTEST_SKIP()
        << "device " << context().device().info().name << " with head_dim " << GetParam().head_dim
        << " runs attention.comp (tensor cores need VK_KHR_cooperative_matrix and head_dim 64 or 128)";
  const std::vector<uint16_t> pool_host = make_pool();
  vk::Buffer pool = device_buffer(pool_host);
  const std::vector<double> ref = reference(b, pool_host);
  for (uint32_t split : {7u, 48u, 256u}) {
    SCOPED_TRACE("split_size " + std::to_string(split));
    expect_close(run(b, {&pool}, split, 0, true), ref, GetParam().head_dim, 3e-3);
  }
  // One split (256 > every position) writes the output itself, here as f16 (what a tensor-core o product
  // reads): the same values within f16's rounding.
  std::vector<uint16_t> half;
  run(b, {&pool}, 256, 0, true, std::nullopt, &half);
  std::vector<float> widened(half.size());
  std::transform(half.begin(), half.end(), widened.begin(), fp16_to_fp32);
  expect_close(widened, ref, GetParam().head_dim, 4e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         // GQA 1, 2, 4, 4, 2, 3, 8, 4, 24; dims 10 and 12: rows not 16-byte aligned; 24 heads
                         // per KV head: more than one work group's rows (two head groups at dim 256).
                         ::testing::Values(Shape{4, 4, 8}, Shape{4, 2, 64}, Shape{8, 2, 128},
                                           Shape{4, 1, 128}, Shape{6, 3, 12}, Shape{6, 2, 10},
                                           Shape{16, 2, 64}, Shape{8, 2, 256}, Shape{24, 1, 256}),
                         [](const auto& p) {
                           return "heads" + std::to_string(p.param.n_heads) + "_kv" +
                                  std::to_string(p.param.n_kv_heads) + "_dim" +
                                  std::to_string(p.param.head_dim);
                         });

}  // namespace
}  // namespace kvtrie::kernels
