// Contract: reads the binding layout back from a SPIR-V compute module, so that the shader stays the only
// source of truth for it: the number of descriptor bindings of set 0 (all storage buffers) and the size of
// the push-constant block. Pure function on immutable data; any thread.
#pragma once
#include <cstdint>
#include <span>

namespace kvtrie::vk {

struct ShaderLayout {
  uint32_t binding_count = 0;       // bindings are 0..binding_count-1 of set 0, each a storage buffer
  uint32_t push_constant_size = 0;  // bytes; 0 when the shader has no push-constant block
};

// Throws kvtrie::Error for malformed SPIR-V, other descriptor sets or non-storage-buffer bindings.
ShaderLayout reflect_spirv(std::span<const uint32_t> words);

}  // namespace kvtrie::vk
