// Contract: what the daemon tells about the Vulkan devices, in the formats Ollama parses (SPEC 5):
// --list-devices lines on stdout ("  Vulkan0: NAME (TOTAL MiB, FREE MiB free)") and, for device discovery,
// one stderr line per device followed by a line containing "system_info:". The lines come from the runner
// (engine::list_devices, which creates and destroys a Vulkan instance). Main thread, before serving.
#pragma once

namespace kvtrie::server {

// Prints engine::list_devices() to stdout; returns the process exit code (0, even with no devices).
int list_devices();

// Prints the discovery lines to stderr: one per device ("ggml_vulkan: Vulkan0: NAME (...)") and then
// "system_info: ...".
void print_discovery_lines();

}  // namespace kvtrie::server
