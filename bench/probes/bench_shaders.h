// Contract: the SPIR-V of the benchmarks' own shaders (bench/shaders, and tuning builds of kernels' shaders:
// attention.comp's probes, matmul_coopmat.comp's without loads or multiplies), compiled and embedded by
// bench/CMakeLists.txt like kernels' own (cmake/kvtrie_shaders.cmake) and never prewarmed. Their
// registration rows (kernels/ops/op_registry.h) name find_bench_spirv as where their SPIR-V is. Immutable
// static data, safe to read from any thread.
#pragma once
#include <span>
#include <string_view>

#include "kernels/vk/shader_registry.h"

namespace kvtrie::bench {

// Every variant bench/CMakeLists.txt embeds (generated).
std::span<const vk::SpirvBlob* const> bench_spirv_blobs();

// The variant of that name, or nullptr.
const vk::SpirvBlob* find_bench_spirv(std::string_view name);

}  // namespace kvtrie::bench
