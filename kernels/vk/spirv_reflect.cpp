#include "kernels/vk/spirv_reflect.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"

namespace kvtrie::vk {
namespace {

// The few SPIR-V opcodes, decorations and storage classes this reader needs (SPIR-V spec, section 3).
enum : uint32_t {
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
  kDecorationBinding = 33,
  kDecorationDescriptorSet = 34,
  kDecorationOffset = 35,
  kStoragePushConstant = 9,
  kStorageStorageBuffer = 12,
};

}  // namespace

ShaderLayout reflect_spirv(std::span<const uint32_t> words) {
  KVTRIE_CHECK(words.size() >= 5 && words[0] == 0x07230203u, "not a SPIR-V module");
  std::unordered_map<uint32_t, uint32_t> binding_of, set_of, scalar_bytes, pointee, pointer_class;
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> vector_of;  // id -> (component, count)
  std::unordered_map<uint32_t, std::vector<uint32_t>> struct_members;
  std::unordered_map<uint32_t, std::unordered_map<uint32_t, uint32_t>> member_offset;
  std::vector<std::pair<uint32_t, uint32_t>> variables;  // (id, pointer type)

  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16;
    const uint32_t op = words[at] & 0xffffu;
    KVTRIE_CHECK(count > 0 && at + count <= words.size(), "truncated SPIR-V instruction");
    const uint32_t* w = &words[at];
    switch (op) {
      case kOpTypeInt:
      case kOpTypeFloat:
        scalar_bytes[w[1]] = w[2] / 8;
        break;
      case kOpTypeVector:
        vector_of[w[1]] = {w[2], w[3]};
        break;
      case kOpTypeStruct:
        struct_members[w[1]].assign(w + 2, w + count);
        break;
      case kOpTypePointer:
        pointer_class[w[1]] = w[2];
        pointee[w[1]] = w[3];
        break;
      case kOpVariable:
        variables.emplace_back(w[2], w[1]);
        break;
      case kOpDecorate:
        if (count >= 4 && w[2] == kDecorationBinding) binding_of[w[1]] = w[3];
        if (count >= 4 && w[2] == kDecorationDescriptorSet) set_of[w[1]] = w[3];
        break;
      case kOpMemberDecorate:
        if (count >= 5 && w[3] == kDecorationOffset) member_offset[w[1]][w[2]] = w[4];
        break;
      default:
        break;
    }
    at += count;
  }

  auto type_bytes = [&](uint32_t type) -> uint32_t {
    if (auto s = scalar_bytes.find(type); s != scalar_bytes.end()) return s->second;
    if (auto v = vector_of.find(type); v != vector_of.end() && scalar_bytes.count(v->second.first))
      return scalar_bytes[v->second.first] * v->second.second;
    throw Error("push-constant member of a type this reflection does not size (use scalars/vectors)");
  };

  ShaderLayout layout;
  for (auto [id, pointer] : variables) {
    const uint32_t storage = pointer_class[pointer];
    if (storage == kStoragePushConstant) {
      const uint32_t block = pointee[pointer];
      const std::vector<uint32_t>& members = struct_members[block];
      for (uint32_t m = 0; m < members.size(); ++m) {
        const uint32_t end = member_offset[block][m] + type_bytes(members[m]);
        if (end > layout.push_constant_size) layout.push_constant_size = end;
      }
    }
    auto binding = binding_of.find(id);
    if (binding == binding_of.end()) continue;
    KVTRIE_CHECK(set_of[id] == 0, "shader uses a descriptor set other than 0");
    KVTRIE_CHECK(storage == kStorageStorageBuffer,
                 "binding " + std::to_string(binding->second) + " is not a storage buffer");
    if (binding->second + 1 > layout.binding_count) layout.binding_count = binding->second + 1;
  }
  return layout;
}

}  // namespace kvtrie::vk
