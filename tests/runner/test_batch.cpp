// Batch, the input of one forward step: sequences' page tables stored end to end, read back per sequence,
// and storage that a cleared and refilled Batch keeps (the engine reuses one Batch every step, so a steady
// decode step must not allocate: it once rebuilt a vector of vectors each step).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runner/engine/gpu_model.h"

namespace kvtrie::engine {
namespace {

std::vector<uint32_t> to_vector(std::span<const uint32_t> s) {
  return {s.begin(), s.end()};
}

TEST(Batch, PageTablesAreReadBackPerSequence) {
  Batch b;
  EXPECT_EQ(b.add_sequence(std::vector<uint32_t>{7, 2, 9}), 0u);
  EXPECT_EQ(b.add_sequence(std::vector<uint32_t>{}), 1u);  // a sequence with no page yet
  EXPECT_EQ(b.add_sequence(std::vector<uint32_t>{4}), 2u);
  ASSERT_EQ(b.sequences(), 3u);
  EXPECT_EQ(to_vector(b.page_table(0)), (std::vector<uint32_t>{7, 2, 9}));
  EXPECT_TRUE(b.page_table(1).empty());
  EXPECT_EQ(to_vector(b.page_table(2)), (std::vector<uint32_t>{4}));
  EXPECT_EQ(b.pages, (std::vector<uint32_t>{7, 2, 9, 4}));
  EXPECT_EQ(b.table_begin, (std::vector<uint32_t>{0, 3, 3}));
  b.clear();
  EXPECT_EQ(b.sequences(), 0u);
  EXPECT_TRUE(b.pages.empty());
}

TEST(Batch, RefillingAClearedBatchKeepsItsStorage) {
  const std::vector<uint32_t> a(40), c(3);
  Batch b;
  const auto fill = [&] {
    b.clear();
    for (uint32_t s = 0; s < 32; ++s) {
      const uint32_t index = b.add_sequence(s % 2 ? a : c);
      b.tokens.push_back(1);
      b.positions.push_back(s);
      b.seq.push_back(index);
      b.logits_for.push_back(s);
    }
  };
  fill();
  const uint32_t* pages = b.pages.data();
  const uint32_t* begins = b.table_begin.data();
  const int32_t* tokens = b.tokens.data();
  const uint32_t* seq = b.seq.data();
  for (int step = 0; step < 3; ++step) {
    fill();
    EXPECT_EQ(b.pages.data(), pages) << "step " << step << " reallocated the page tables";
    EXPECT_EQ(b.table_begin.data(), begins);
    EXPECT_EQ(b.tokens.data(), tokens);
    EXPECT_EQ(b.seq.data(), seq);
  }
  EXPECT_EQ(b.page_table(31).size(), 40u);
  EXPECT_EQ(b.page_table(30).size(), 3u);
}

}  // namespace
}  // namespace kvtrie::engine
