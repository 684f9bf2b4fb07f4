// Contract: Instance owns the VkInstance and, when validation is on, the Khronos validation layer's
// VK_EXT_debug_utils messenger. Every warning or error message the layer reports is logged (spdlog) and
// counted, per instance and process-wide (validation_message_count()), so tests can fail on any message.
// Validation is on when InstanceOptions::validation is set or the environment has KVTRIE_VALIDATION=1.
// Move-only. Create and destroy on one thread; the message counters are atomic and readable from any thread.
// Every Device created from it must be destroyed before it.
#pragma once
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace kvtrie::vk {

// The Vulkan version the instance asks for. A device is used at the smaller of this and its own version
// (PhysicalDeviceInfo::usable_api_version): 1.3 lets Vulkan 1.3 devices run SPIR-V 1.6 shaders (the
// GL_NV_cooperative_matrix2 ones) and use 1.3 core features; 1.2 devices keep working as before.
inline constexpr uint32_t kInstanceApiVersion = VK_API_VERSION_1_3;

struct InstanceOptions {
  bool validation = false;  // also turned on by KVTRIE_VALIDATION=1 in the environment
};

// Warning and error messages reported by the validation layer so far, across all instances of the process.
uint64_t validation_message_count();
// Whether the Khronos validation layer is installed, and whether KVTRIE_VALIDATION=1 asks for it.
bool validation_layer_installed();
bool validation_requested_by_environment();

class Instance {
 public:
  explicit Instance(InstanceOptions options = {});
  ~Instance();
  Instance(Instance&& other) noexcept;
  Instance& operator=(Instance&& other) noexcept;
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  // Warning and error messages received by this instance's messenger.
  uint64_t message_count() const { return counter_ ? counter_->load() : 0; }

 private:
  void destroy() noexcept;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  // Heap-allocated so the messenger's user-data pointer stays valid when the Instance moves.
  std::unique_ptr<std::atomic<uint64_t>> counter_;
};

}  // namespace kvtrie::vk
