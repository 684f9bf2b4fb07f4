#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

const char* result_name(VkResult result) {
  switch (result) {
#define KVTRIE_RESULT(r) \
  case r:                \
    return #r;
    KVTRIE_RESULT(VK_SUCCESS)
    KVTRIE_RESULT(VK_NOT_READY)
    KVTRIE_RESULT(VK_TIMEOUT)
    KVTRIE_RESULT(VK_EVENT_SET)
    KVTRIE_RESULT(VK_EVENT_RESET)
    KVTRIE_RESULT(VK_INCOMPLETE)
    KVTRIE_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    KVTRIE_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KVTRIE_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    KVTRIE_RESULT(VK_ERROR_DEVICE_LOST)
    KVTRIE_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    KVTRIE_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    KVTRIE_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    KVTRIE_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    KVTRIE_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    KVTRIE_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    KVTRIE_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KVTRIE_RESULT(VK_ERROR_FRAGMENTED_POOL)
    KVTRIE_RESULT(VK_ERROR_UNKNOWN)
    KVTRIE_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    KVTRIE_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    KVTRIE_RESULT(VK_ERROR_FRAGMENTATION)
    KVTRIE_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    KVTRIE_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef KVTRIE_RESULT
    default:
      return nullptr;
  }
}

void throw_vk_error(VkResult result, const char* call, std::source_location where) {
  const char* name = result_name(result);
  std::string text = name ? name : "VkResult(" + std::to_string(static_cast<int>(result)) + ")";
  throw VulkanError(result, text + " from " + call, where);
}

}  // namespace kvtrie::vk
