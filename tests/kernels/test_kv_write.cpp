// kv_write against a reference in this file that follows kernels/ops/kv_layout.h: K and V rows of a batch
// (strided, as inside a fused QKV buffer) land as f16 at their slots' pages, layers apart, in a pool bound as
// two chunks of whole pages; untouched slots keep their old contents; negative slots are skipped.
// kv_write_rope: the same pages as rope on K followed by kv_write (partial rope dims, frequency factors), and
// the K buffer left as it was; given Q's rope too, Q rotated in place as rope() rotates it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kernels/ops/kv_write.h"
#include "kernels/ops/rope.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class KvWrite : public test::VulkanTest {};

// Llama-3-style rope over 8 of each head's dims (the last pairs of a 12-wide head stay as they are), with
// frequency factors.
RopeArgs llama3_rope(vk::BufferView positions, vk::BufferView factors, uint32_t n_tokens, uint32_t heads,
                     uint32_t head_dim) {
  RopeArgs rope;
  rope.positions = positions;
  rope.freq_factors = factors;
  rope.n_tokens = n_tokens;
  rope.n_heads = heads;
  rope.head_dim = head_dim;
  rope.rope_dims = 8;
  rope.freq_base = 500000.0f;
  return rope;
}

TEST_F(KvWrite, ScattersKAndVIntoPagesAtEachTokensSlot) {
  const KvLayout layout{3, 5, 2 * 14};  // 3 layers, P = 5, 2 kv heads of 14
  const uint32_t n_pages = 4, n_tokens = 6, stride = 3 * layout.kv_dim + 1, layer = 1;
  const std::vector<float> qkv = random_floats(size_t{n_tokens} * stride, -4.0f, 4.0f);
  // Slots of two sequences in different pages, one skipped token, one in the last slot of the last page.
  const std::vector<int32_t> slots = {0, 1, 2 * 5 + 3, -1, 4 * 5 - 1, 5 + 2};
  std::vector<uint16_t> pool(layout.page_elements() * n_pages);
  for (uint16_t& h : pool) h = fp32_to_fp16(random_floats(1)[0]);

  vk::Buffer bq = device_buffer(qkv), bs = device_buffer(slots), bp = device_buffer(pool);
  Kernels k(context(), Prewarm::No);
  vk::CommandRecorder rec(context());
  rec.begin();
  for (uint32_t first : {0u, 2u}) {  // the pool bound as two chunks of two pages
    KvWriteArgs a;
    a.k = bq.view(layout.kv_dim * 4, (qkv.size() - layout.kv_dim) * 4);  // K after Q in each token
    a.v = bq.view(2 * layout.kv_dim * 4, (qkv.size() - 2 * layout.kv_dim) * 4);
    a.k_stride = a.v_stride = stride;
    a.slots = bs.view(0, slots.size() * 4);
    a.pages = bp.view(first * layout.page_bytes(), 2 * layout.page_bytes());
    a.layout = layout;
    a.layer = layer;
    a.n_tokens = n_tokens;
    a.page_begin = first;
    a.page_count = 2;
    kv_write(rec, k, a);
  }
  rec.end();
  rec.submit_and_wait();

  std::vector<uint16_t> want = pool;
  for (uint32_t t = 0; t < n_tokens; ++t) {
    if (slots[t] < 0) continue;
    const uint32_t page = slots[t] / layout.page_tokens, s = slots[t] % layout.page_tokens;
    for (uint32_t c = 0; c < layout.kv_dim; ++c) {
      want[layout.offset_elements(page, layer, false, s, c)] =
          fp32_to_fp16(qkv[size_t{t} * stride + layout.kv_dim + c]);
      want[layout.offset_elements(page, layer, true, s, c)] =
          fp32_to_fp16(qkv[size_t{t} * stride + 2 * layout.kv_dim + c]);
    }
  }
  const std::vector<uint16_t> got = read_back<uint16_t>(bp, pool.size());
  for (size_t i = 0; i < want.size(); ++i) {
    // The GPU's f32->f16 rounding may differ by one unit in the last place from round-to-nearest-even.
    ASSERT_NEAR(fp16_to_fp32(got[i]), fp16_to_fp32(want[i]), std::fabs(fp16_to_fp32(want[i])) * 1e-3f + 1e-7f)
        << "element " << i;
  }
}

TEST_F(KvWrite, RopeOnTheWayEqualsRopeThenWrite) {
  const uint32_t head_dim = 12, heads = 2, n_tokens = 5;
  const KvLayout layout{2, 4, heads * head_dim};
  const std::vector<float> kv = random_floats(size_t{n_tokens} * layout.kv_dim, -2.0f, 2.0f);
  const std::vector<float> v = random_floats(size_t{n_tokens} * layout.kv_dim, -2.0f, 2.0f);
  const std::vector<int32_t> positions = {0, 3, 17, 250, 4095};
  const std::vector<int32_t> slots = {0, 5, 2, 7, 1};
  const std::vector<float> factors = random_floats(head_dim / 2, 1.0f, 8.0f);
  const std::vector<uint16_t> zeros(layout.page_elements() * 2);
  vk::Buffer bk_fused = device_buffer(kv), bk_split = device_buffer(kv), bv = device_buffer(v);
  vk::Buffer bpos = device_buffer(positions), bslots = device_buffer(slots), bf = device_buffer(factors);
  vk::Buffer fused = device_buffer(zeros), split = device_buffer(zeros);
  Kernels k(context(), Prewarm::No);
  auto args = [&](const vk::Buffer& kb, const vk::Buffer& pages) {
    KvWriteArgs a;
    a.k = kb.view(0, kv.size() * 4);
    a.v = bv.view(0, v.size() * 4);
    a.slots = bslots.view(0, slots.size() * 4);
    a.pages = pages.view(0, zeros.size() * 2);
    a.layout = layout;
    a.layer = 1;
    a.n_tokens = n_tokens;
    a.page_count = 2;
    return a;
  };
  RopeArgs rope = llama3_rope(bpos.view(0, positions.size() * 4), bf.view(0, factors.size() * 4), n_tokens,
                              heads, head_dim);
  vk::CommandRecorder rec(context());
  rec.begin();
  kv_write_rope(rec, k, args(bk_fused, fused), rope);
  rope.x = bk_split.view(0, kv.size() * 4);
  kernels::rope(rec, k, rope);
  kv_write(rec, k, args(bk_split, split));
  rec.end();
  rec.submit_and_wait();
  const std::vector<uint16_t> got = read_back<uint16_t>(fused, zeros.size());
  const std::vector<uint16_t> want = read_back<uint16_t>(split, zeros.size());
  size_t rotated = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    // One f16 unit in the last place: the two shaders may contract the rotation into FMAs differently.
    EXPECT_LE(std::abs(int{got[i]} - int{want[i]}), 1) << "element " << i;
    rotated += got[i] != fp32_to_fp16(0.0f);
  }
  EXPECT_GT(rotated, 0u);
  EXPECT_EQ(read_back<float>(bk_fused, kv.size()), kv) << "the K buffer must stay unrotated";
  EXPECT_NE(read_back<float>(bk_split, kv.size()), kv) << "the reference path rotated K in place";
}

// The fused product's rows [Q | K | V | padding] of each token, bound once: the QKV build writes the same
// pages as kv_write_rope on K and V, and rotates Q in place as rope() does, leaving K, V and the padding.
TEST_F(KvWrite, RopeOnTheWayAlsoRotatesQInPlace) {
  const uint32_t head_dim = 12, heads = 2, q_heads = 4, n_tokens = 5;
  const KvLayout layout{2, 4, heads * head_dim};
  const uint32_t q_dim = q_heads * head_dim, stride = q_dim + 2 * layout.kv_dim + 6;
  const std::vector<float> rows = random_floats(size_t{n_tokens} * stride, -2.0f, 2.0f);
  const std::vector<int32_t> positions = {0, 3, 17, 250, 4095};
  const std::vector<int32_t> slots = {0, 5, 2, 7, 1};
  const std::vector<float> factors = random_floats(head_dim / 2, 1.0f, 8.0f);
  const std::vector<uint16_t> zeros(layout.page_elements() * 2);
  vk::Buffer fused_rows = device_buffer(rows), ref_rows = device_buffer(rows);
  vk::Buffer bpos = device_buffer(positions), bslots = device_buffer(slots), bf = device_buffer(factors);
  vk::Buffer fused = device_buffer(zeros), reference = device_buffer(zeros);
  Kernels k(context(), Prewarm::No);
  const uint64_t bytes = rows.size() * 4;
  auto args = [&](const vk::Buffer& b, const vk::Buffer& pages) {
    KvWriteArgs a;
    a.k = b.view(uint64_t{q_dim} * 4, bytes - uint64_t{q_dim} * 4);
    a.v = b.view(uint64_t{q_dim + layout.kv_dim} * 4, bytes - uint64_t{q_dim + layout.kv_dim} * 4);
    a.k_stride = a.v_stride = stride;
    a.slots = bslots.view(0, slots.size() * 4);
    a.pages = pages.view(0, zeros.size() * 2);
    a.layout = layout;
    a.n_tokens = n_tokens;
    a.page_count = 2;
    return a;
  };
  RopeArgs rope = llama3_rope(bpos.view(0, positions.size() * 4), bf.view(0, factors.size() * 4), n_tokens,
                              heads, head_dim);
  RopeArgs q_rope = rope;
  q_rope.n_heads = q_heads;
  q_rope.token_stride = stride;
  vk::CommandRecorder rec(context());
  rec.begin();
  q_rope.x = fused_rows.view(0, bytes);
  kv_write_rope(rec, k, args(fused_rows, fused), rope, &q_rope);
  kv_write_rope(rec, k, args(ref_rows, reference), rope);
  q_rope.x = ref_rows.view(0, bytes);
  kernels::rope(rec, k, q_rope);
  rec.end();
  rec.submit_and_wait();
  EXPECT_EQ(read_back<uint16_t>(fused, zeros.size()), read_back<uint16_t>(reference, zeros.size()));
  const std::vector<float> got = read_back<float>(fused_rows, rows.size()),
                           want = read_back<float>(ref_rows, rows.size());
  size_t rotated = 0;
  for (uint32_t t = 0; t < n_tokens; ++t)
    for (uint32_t c = 0; c < stride; ++c) {
      const size_t i = size_t{t} * stride + c;
      if (c < q_dim) {
        EXPECT_NEAR(got[i], want[i], 1e-5f * (std::fabs(want[i]) + 1.0f)) << "token " << t << " Q " << c;
        rotated += got[i] != rows[i];
      } else {
        EXPECT_EQ(got[i], rows[i]) << "token " << t << " column " << c << " (K, V or padding) changed";
      }
    }
  // Pairs inside rope_dims of every head of tokens 1.. (position 0 leaves token 0 as it is).
  EXPECT_GE(rotated, size_t{(n_tokens - 1) * q_heads * 8 - 4});
}

}  // namespace
}  // namespace kvtrie::kernels
