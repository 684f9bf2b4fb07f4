// Contract: VK_CHECK(call) evaluates a Vulkan call and throws vk::VulkanError (a kvtrie::Error) carrying the
// VkResult, its name and the call's text in what(), when the call does not return VK_SUCCESS (or
// VK_INCOMPLETE, which enumeration calls report for a partial list and which callers handle themselves).
// Callers that recover from a result (out of memory) test result(), never the text. Header plus
// vk_check.cpp; any thread.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

#include "base/error.h"

namespace kvtrie::vk {

// A failed Vulkan call: what() names the result and the call, result() is the VkResult itself.
class VulkanError : public Error {
 public:
  VulkanError(VkResult result, const std::string& what,
              std::source_location where = std::source_location::current())
      : Error(what, where), result_(result) {}
  VkResult result() const noexcept { return result_; }

 private:
  VkResult result_;
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.; "VkResult(<n>)" for values this build does not name.
const char* result_name(VkResult result);

// Throws VulkanError(result, "<result name> from <call>").
[[noreturn]] void throw_vk_error(VkResult result, const char* call,
                                 std::source_location where = std::source_location::current());

}  // namespace kvtrie::vk

#define VK_CHECK(call)                                                       \
  do {                                                                       \
    VkResult vk_check_result_ = (call);                                      \
    if (vk_check_result_ != VK_SUCCESS && vk_check_result_ != VK_INCOMPLETE) \
      ::kvtrie::vk::throw_vk_error(vk_check_result_, #call);                 \
  } while (0)
