// Contract: what a physical device offers for the shader paths beyond the portable one (SPEC.md section 3):
// integer dot product, KHR cooperative matrices with the shapes the device multiplies, NV cooperative
// matrix 2, and subgroup size control. FastPathSupport is a plain snapshot taken by query_fast_paths() when
// devices are listed (PhysicalDeviceInfo::fast); it owns no handle. Whether a path is *enabled* also depends
// on the shaders this build embeds: vk::Device decides and answers that (device.h). VK_NV_cooperative_matrix
// (the first-generation extension) is read by physical_device.cpp as before. Call query_fast_paths() from the
// thread that owns the Instance; the snapshot itself is immutable data.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/vk/vulkan_compat.h"

namespace kvtrie::vk {

// One cooperative-matrix multiply the device supports: Result(MxN) = A(MxK) * B(KxN) + C(MxN).
struct CoopMatShape {
  uint32_t m = 0;
  uint32_t n = 0;
  uint32_t k = 0;
  VkComponentTypeKHR a = VK_COMPONENT_TYPE_FLOAT16_KHR;
  VkComponentTypeKHR b = VK_COMPONENT_TYPE_FLOAT16_KHR;
  VkComponentTypeKHR c = VK_COMPONENT_TYPE_FLOAT32_KHR;
  VkComponentTypeKHR result = VK_COMPONENT_TYPE_FLOAT32_KHR;
  bool saturating = false;  // saturatingAccumulation (integer types)
  VkScopeKHR scope = VK_SCOPE_SUBGROUP_KHR;
  bool operator==(const CoopMatShape&) const = default;
};

// One VK_NV_cooperative_matrix2 flexible-dimensions entry: M, N and K may be any multiple of the
// granularities held in shape.m, shape.n, shape.k, with a work group of `workgroup_invocations`.
struct FlexibleCoopMatShape {
  CoopMatShape shape;
  uint32_t workgroup_invocations = 0;
};

struct NvCoopMat2Features {
  bool workgroup_scope = false;
  bool flexible_dimensions = false;
  bool reductions = false;
  bool conversions = false;
  bool per_element_operations = false;
  bool tensor_addressing = false;
  bool block_loads = false;
  // Every feature on: what matrix kernels written for the extension (as llama.cpp's are) use.
  bool all() const {
    return workgroup_scope && flexible_dimensions && reductions && conversions && per_element_operations &&
           tensor_addressing && block_loads;
  }
};

struct FastPathSupport {
  // Integer dot product: Vulkan 1.3 core, or VK_KHR_shader_integer_dot_product (then `int_dot_extension`).
  bool int_dot = false;  // shaderIntegerDotProduct
  bool int_dot_extension = false;
  // Whether packed 4x8-bit dot products (dotPacked4x8EXT) run on dedicated instructions rather than emulated.
  bool int_dot_4x8_signed_accelerated = false;
  bool int_dot_4x8_mixed_accelerated = false;
  bool int_dot_4x8_unsigned_accelerated = false;

  // VK_KHR_cooperative_matrix: the feature, usable from compute shaders, and the supported multiplies.
  bool khr_coopmat = false;
  std::vector<CoopMatShape> khr_coopmat_shapes;

  // VK_NV_cooperative_matrix2 (needs VK_KHR_cooperative_matrix, and Vulkan 1.3 for its SPIR-V 1.6 shaders).
  bool nv_coopmat2 = false;  // the extension is offered
  NvCoopMat2Features nv_coopmat2_features;
  uint32_t nv_coopmat2_max_workgroup_size = 0;  // cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
  uint32_t nv_coopmat2_max_dimension = 0;       // cooperativeMatrixFlexibleDimensionsMaxDimension
  uint32_t nv_coopmat2_reserved_shared_memory = 0;
  std::vector<FlexibleCoopMatShape> nv_coopmat2_flexible_shapes;

  // Subgroup size control: Vulkan 1.3 core, or VK_EXT_subgroup_size_control (then the `_extension` flag).
  bool subgroup_size_control = false;
  bool subgroup_size_control_extension = false;
  bool compute_full_subgroups = false;
  bool required_subgroup_size_in_compute = false;  // requiredSubgroupSizeStages has the compute stage
  uint32_t min_subgroup_size = 0;
  uint32_t max_subgroup_size = 0;
};

// Reads what `device` offers. `api_version`: the Vulkan version usable with it (the smaller of the
// instance's and the device's), which decides whether the 1.3 core features count without their extension.
FastPathSupport query_fast_paths(VkInstance instance, VkPhysicalDevice device, uint32_t api_version,
                                 std::span<const VkExtensionProperties> extensions);

// Short names for logs: "f16", "f32", "s8", "u8", ...
const char* component_type_name(VkComponentTypeKHR type);
// "16x16x16 f16*f16+f32->f32" (plus " sat" and the scope when not a subgroup).
std::string describe_shape(const CoopMatShape& shape);

}  // namespace kvtrie::vk
