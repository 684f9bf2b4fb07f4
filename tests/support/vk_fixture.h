// Contract: VulkanTest is the gtest fixture base for every test that touches the GPU. One vk::Context per
// test suite (created in SetUpTestSuite, honouring KVTRIE_VALIDATION=1 / VK_DRIVER_FILES set by ctest);
// each test fails at teardown if the validation layer reported any warning or error during it, or if any
// device allocation is still alive. A context that cannot be created fails every test of the suite (from
// SetUp: a failure inside SetUpTestSuite makes gtest mark the tests skipped, and ctest reports skipped).
// Single-threaded, like gtest fixtures.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/vk/buffer.h"
#include "kernels/vk/context.h"
#include "kernels/vk/staging.h"

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
  // n uniform values in [lo, hi) from rng() (never all zeros for n > 0 and lo < hi).
  std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f);
  // A device-local buffer holding `data`, with at least 16 spare bytes after it (word-rounded reads).
  template <typename T>
  vk::Buffer device_buffer(std::span<const T> data) {
    vk::Buffer b(context().device(), (data.size_bytes() + 15) / 16 * 16 + 16, vk::MemoryKind::DeviceLocal);
    vk::upload(context(), b, 0, std::as_bytes(data));
    return b;
  }
  template <typename T>
  vk::Buffer device_buffer(const std::vector<T>& data) {
    return device_buffer(std::span<const T>(data));
  }
  template <typename T>
  std::vector<T> read_back(const vk::Buffer& b, size_t count) {
    return vk::download<T>(context(), b, count);
  }

 private:
  static std::unique_ptr<vk::Context> context_;
  static std::string setup_error_;  // why SetUpTestSuite failed; reported by each test's SetUp
  uint64_t messages_at_start_ = 0;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

}  // namespace kvtrie::test
