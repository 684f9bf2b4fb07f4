#include "kernels/vk/instance.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {

std::atomic<uint64_t> g_validation_messages{0};

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool env_validation() {
  const char* value = std::getenv("KVTRIE_VALIDATION");
  return value != nullptr && std::string_view(value) != "" && std::string_view(value) != "0";
}

bool has_layer(const char* name) {
  uint32_t count = 0;
  VK_CHECK(vkEnumerateInstanceLayerProperties(&count, nullptr));
  std::vector<VkLayerProperties> layers(count);
  VK_CHECK(vkEnumerateInstanceLayerProperties(&count, layers.data()));
  for (const VkLayerProperties& layer : layers)
    if (std::strcmp(layer.layerName, name) == 0) return true;
  return false;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  // The messenger is created for warnings and errors only; each one counts as a test failure.
  static_cast<std::atomic<uint64_t>*>(user)->fetch_add(1);
  g_validation_messages.fetch_add(1);
  const char* text = data && data->pMessage ? data->pMessage : "(no message)";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
    spdlog::error("vulkan validation: {}", text);
  else
    spdlog::warn("vulkan validation: {}", text);
  return VK_FALSE;
}

}  // namespace

uint64_t validation_message_count() {
  return g_validation_messages.load();
}

bool validation_layer_installed() {
  return has_layer(kValidationLayer);
}

bool validation_requested_by_environment() {
  return env_validation();
}

Instance::Instance(InstanceOptions options) {
  const bool validation = options.validation || env_validation();
  if (validation && !has_layer(kValidationLayer))
    throw Error(
        "validation requested but VK_LAYER_KHRONOS_validation is not installed "
        "(Debian: vulkan-validationlayers)");

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kvtrie";
  app.pEngineName = "kvtrie";
  app.apiVersion = kInstanceApiVersion;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  if (validation) {
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  }
  counter_ = std::make_unique<std::atomic<uint64_t>>(0);

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_message;
  messenger_info.pUserData = counter_.get();

  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  // Synchronization validation reports missing or wrong barriers (the recorder's automatic barriers are
  // checked by every GPU test, not only by their results, which a serial CPU driver would hide).
  const VkValidationFeatureEnableEXT enables[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{};
  features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  features.pNext = &messenger_info;
  // Chained so that messages from vkCreateInstance/vkDestroyInstance themselves are caught too.
  if (validation) info.pNext = &features;
  VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
#if defined(KVTRIE_SANITIZE_BUILD)
  // The loader unloads the validation layer at vkDestroyInstance, but the layer (1.3.239, Debian bookworm)
  // keeps state reachable only from its own globals: once unmapped, LeakSanitizer reports that state as
  // leaked, from addresses it can no longer name. Kept loaded (RTLD_NODELETE), the state stays reachable
  // and a leak that is kvtrie's is reported with names. Sanitizer builds only (docs/reliability.md).
  if (validation) dlopen("libVkLayer_khronos_validation.so", RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  // Lavapipe, the tests' driver, likewise (mesa 22.3.6-1+deb12u2 leaves a 128-byte block it allocated).
  dlopen("libvulkan_lvp.so", RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
#endif

  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create == nullptr) {
      destroy();
      throw Error("vkCreateDebugUtilsMessengerEXT is unavailable although validation was requested");
    }
    VkResult result = create(instance_, &messenger_info, nullptr, &messenger_);
    if (result != VK_SUCCESS) {
      destroy();
      throw_vk_error(result, "vkCreateDebugUtilsMessengerEXT");
    }
  }
}

Instance::~Instance() {
  destroy();
}

Instance::Instance(Instance&& other) noexcept
    : instance_(std::exchange(other.instance_, VK_NULL_HANDLE)),
      messenger_(std::exchange(other.messenger_, VK_NULL_HANDLE)),
      counter_(std::move(other.counter_)) {}

Instance& Instance::operator=(Instance&& other) noexcept {
  if (this != &other) {
    destroy();
    instance_ = std::exchange(other.instance_, VK_NULL_HANDLE);
    messenger_ = std::exchange(other.messenger_, VK_NULL_HANDLE);
    counter_ = std::move(other.counter_);
  }
  return *this;
}

void Instance::destroy() noexcept {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy_messenger = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy_messenger) destroy_messenger(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  if (instance_ != VK_NULL_HANDLE) {
    vkDestroyInstance(instance_, nullptr);
    instance_ = VK_NULL_HANDLE;
  }
}

}  // namespace kvtrie::vk
