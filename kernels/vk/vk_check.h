// Contract: VK_CHECK(call) evaluates a Vulkan call and throws kvtrie::Error carrying the VkResult's name and
// the call's text when it does not return VK_SUCCESS (or VK_INCOMPLETE, which enumeration calls report
// for a partial list and which callers handle themselves). Header plus vk_check.cpp; any thread.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

#include "base/error.h"

namespace kvtrie::vk {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.; "VkResult(<n>)" for values this build does not name.
const char* result_name(VkResult result);

[[noreturn]] void throw_vk_error(VkResult result, const char* call,
                                 std::source_location where = std::source_location::current());

}  // namespace kvtrie::vk

#define VK_CHECK(call)                                                       \
  do {                                                                       \
    VkResult vk_check_result_ = (call);                                      \
    if (vk_check_result_ != VK_SUCCESS && vk_check_result_ != VK_INCOMPLETE) \
      ::kvtrie::vk::throw_vk_error(vk_check_result_, #call);                 \
  } while (0)
