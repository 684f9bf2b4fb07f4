#include "server/devices.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>

#include "runner/engine/make_engine.h"

namespace kvtrie::server {

int list_devices() {
  std::cout << "Available devices:\n";
  for (const auto& line : engine::list_devices()) std::cout << line << '\n';
  std::cout.flush();
  return 0;
}

void print_discovery_lines() {
  const auto lines = engine::list_devices();
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
