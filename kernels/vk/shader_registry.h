// Contract: SPIR-V modules compiled from kernels/shaders at build time and embedded in the binary.
// Immutable static data, safe to read from any thread. Variants are declared in shaders/variants.cmake.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace kvtrie::vk {

struct SpirvBlob {
  const char* name;
  const uint32_t* words;
  uint32_t word_count;
};

// Every embedded variant, in declaration order.
std::span<const SpirvBlob* const> all_spirv_blobs();

// The variant of that name, or nullptr.
inline const SpirvBlob* find_spirv(std::string_view name) {
  for (const SpirvBlob* blob : all_spirv_blobs())
    if (name == blob->name) return blob;
  return nullptr;
}

}  // namespace kvtrie::vk
