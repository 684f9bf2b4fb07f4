#include "server/devices.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <thread>

// The Vulkan device listing lives in kernels/vk; until it is part of the build, report no devices.
#if __has_include("kernels/vk/physical_device.h") && __has_include("kernels/vk/instance.h")
#define KVTRIE_HAS_VK_LISTING 1
#include "kernels/vk/instance.h"
#include "kernels/vk/physical_device.h"
#else
#define KVTRIE_HAS_VK_LISTING 0
#endif

namespace kvtrie::server {

std::vector<std::string> device_lines() {
  std::vector<std::string> lines;
#if KVTRIE_HAS_VK_LISTING
  try {
    vk::Instance instance;
    for (const auto& info : vk::list_physical_devices(instance))
      lines.push_back(vk::describe_device_line(info));
  } catch (const std::exception& e) {
    spdlog::warn("cannot enumerate Vulkan devices: {}", e.what());
  }
#else
  spdlog::warn("this build has no Vulkan device listing");
#endif
  return lines;
}

int list_devices() {
  std::cout << "Available devices:\n";
  for (const auto& line : device_lines()) std::cout << line << '\n';
  std::cout.flush();
  return 0;
}

void print_discovery_lines() {
  const auto lines = device_lines();
  std::fprintf(stderr, "ggml_vulkan: Found %zu Vulkan devices:\n", lines.size());
  for (const auto& line : lines) {
    // "  Vulkan0: NAME (...)" -> "ggml_vulkan: 0 = NAME (...)" style, keeping the device name and sizes.
    std::fprintf(stderr, "ggml_vulkan:%s\n", line.c_str() + (line.rfind("  ", 0) == 0 ? 1 : 0));
  }
  std::fprintf(stderr, "system_info: n_threads = %u | kvtrie %s | VULKAN = 1 |\n",
               std::max(1u, std::thread::hardware_concurrency()), KVTRIE_VERSION);
  std::fflush(stderr);
}

}  // namespace kvtrie::server
