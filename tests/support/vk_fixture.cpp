#include "tests/support/vk_fixture.h"

#include <cstdlib>
#include <string>

#include "kernels/vk/instance.h"
#include "kernels/vk/memory.h"

namespace kvtrie::test {

std::unique_ptr<vk::Context> VulkanTest::context_;
std::string VulkanTest::setup_error_;

void VulkanTest::SetUpTestSuite() {
  setup_error_.clear();
  const uint64_t before = vk::validation_message_count();
  try {
    context_ = std::make_unique<vk::Context>();
  } catch (const std::exception& e) {
    setup_error_ = std::string("cannot create the Vulkan context: ") + e.what();
    return;
  }
  if (vk::validation_message_count() != before)
    setup_error_ = "validation messages while creating the Vulkan context";
}

void VulkanTest::TearDownTestSuite() {
  const uint64_t before = vk::validation_message_count();
  context_.reset();
  EXPECT_EQ(vk::validation_message_count(), before)
      << "validation messages while destroying the Vulkan context";
  EXPECT_EQ(vk::live_allocation_count(), 0u) << "device allocations alive after the context was destroyed";
}

void VulkanTest::SetUp() {
  ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  ASSERT_NE(context_, nullptr) << "no Vulkan context";
  messages_at_start_ = vk::validation_message_count();
  if (const char* fixed = std::getenv("KVTRIE_TEST_SEED")) {
    seed_ = std::strtoull(fixed, nullptr, 10);
  } else {
    seed_ = std::random_device{}();
    seed_ = (seed_ << 32) ^ std::random_device{}();
  }
  rng_.seed(seed_);
  trace_ = std::make_unique<::testing::ScopedTrace>(
      __FILE__, __LINE__, "random seed " + std::to_string(seed_) + " (KVTRIE_TEST_SEED)");
}

std::vector<float> VulkanTest::random_floats(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng_);
  return out;
}

void VulkanTest::TearDown() {
  if (context_) context_->device().wait_idle();
  EXPECT_EQ(vk::validation_message_count(), messages_at_start_)
      << "Vulkan validation messages during the test";
  EXPECT_EQ(vk::live_allocation_count(), 0u) << "device allocations still alive at the end of the test";
  trace_.reset();
}

}  // namespace kvtrie::test
