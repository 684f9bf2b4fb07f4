// Contract: VulkanTest is the gtest fixture base for every test that touches the GPU. One vk::Context per
// test suite (created in SetUpTestSuite, honouring KVTRIE_VALIDATION=1 / VK_DRIVER_FILES set by ctest);
// each test fails at teardown if the validation layer reported any warning or error during it, or if any
// device allocation is still alive. Single-threaded, like gtest fixtures.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>

#include "kernels/vk/context.h"

namespace kvtrie::test {

class VulkanTest : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

 protected:
  void SetUp() override;
  void TearDown() override;
  static vk::Context& context() { return *context_; }
  // A fresh random seed per test, printed (in SCOPED_TRACE) so a failure can be reproduced with
  // KVTRIE_TEST_SEED=<seed>.
  uint64_t seed() const { return seed_; }
  std::mt19937_64& rng() { return rng_; }

 private:
  static std::unique_ptr<vk::Context> context_;
  uint64_t messages_at_start_ = 0;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

}  // namespace kvtrie::test
