#include "kernels/vk/fast_paths.h"

#include <string_view>

#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {

bool has_extension(std::span<const VkExtensionProperties> extensions, std::string_view name) {
  for (const VkExtensionProperties& e : extensions)
    if (name == e.extensionName) return true;
  return false;
}

// Pushes `s` to the front of a pNext chain.
template <typename Struct>
void link(void*& chain, Struct& s) {
  s.pNext = chain;
  chain = &s;
}

// The loader of bookworm's era does not export the cooperative-matrix queries: look them up.
template <typename Fn>
Fn instance_function(VkInstance instance, const char* name) {
  return reinterpret_cast<Fn>(vkGetInstanceProcAddr(instance, name));
}

CoopMatShape to_shape(uint32_t m, uint32_t n, uint32_t k, const auto& p) {
  return {m, n, k, p.AType, p.BType, p.CType, p.ResultType, p.saturatingAccumulation == VK_TRUE, p.scope};
}

void read_khr_shapes(VkInstance instance, VkPhysicalDevice device, FastPathSupport& out) {
  auto query = instance_function<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
      instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  if (query == nullptr) {
    out.khr_coopmat = false;  // feature without its query: nothing could say which shapes work
    return;
  }
  uint32_t count = 0;
  VK_CHECK(query(device, &count, nullptr));
  std::vector<VkCooperativeMatrixPropertiesKHR> props(count);
  for (auto& p : props) p.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
  VK_CHECK(query(device, &count, props.data()));
  props.resize(count);
  for (const auto& p : props) out.khr_coopmat_shapes.push_back(to_shape(p.MSize, p.NSize, p.KSize, p));
}

void read_flexible_shapes(VkInstance instance, VkPhysicalDevice device, FastPathSupport& out) {
  auto query = instance_function<PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV>(
      instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
  if (query == nullptr) return;
  uint32_t count = 0;
  VK_CHECK(query(device, &count, nullptr));
  std::vector<VkCooperativeMatrixFlexibleDimensionsPropertiesNV> props(count);
  for (auto& p : props) p.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
  VK_CHECK(query(device, &count, props.data()));
  props.resize(count);
  for (const auto& p : props)
    out.nv_coopmat2_flexible_shapes.push_back(
        {to_shape(p.MGranularity, p.NGranularity, p.KGranularity, p), p.workgroupInvocations});
}

}  // namespace

FastPathSupport query_fast_paths(VkInstance instance, VkPhysicalDevice device, uint32_t api_version,
                                 std::span<const VkExtensionProperties> extensions) {
  FastPathSupport out;
  const bool core13 = api_version >= VK_API_VERSION_1_3;
  out.int_dot_extension = has_extension(extensions, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  out.subgroup_size_control_extension =
      has_extension(extensions, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  const bool int_dot_known = core13 || out.int_dot_extension;
  const bool size_control_known = core13 || out.subgroup_size_control_extension;
  const bool khr_coopmat = has_extension(extensions, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  out.nv_coopmat2 = khr_coopmat && has_extension(extensions, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);

  // Each struct is chained only where the device knows it (its extension is offered, or Vulkan 1.3 core).
  VkPhysicalDeviceShaderIntegerDotProductFeatures int_dot{};
  int_dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control{};
  size_control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopmat{};
  coopmat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV coopmat2{};
  coopmat2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  void* chain = nullptr;
  if (int_dot_known) link(chain, int_dot);
  if (size_control_known) link(chain, size_control);
  if (khr_coopmat) link(chain, coopmat);
  if (out.nv_coopmat2) link(chain, coopmat2);
  features.pNext = chain;
  vkGetPhysicalDeviceFeatures2(device, &features);

  VkPhysicalDeviceShaderIntegerDotProductProperties int_dot_props{};
  int_dot_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
  VkPhysicalDeviceSubgroupSizeControlProperties size_props{};
  size_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  VkPhysicalDeviceCooperativeMatrixPropertiesKHR coopmat_props{};
  coopmat_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
  VkPhysicalDeviceCooperativeMatrix2PropertiesNV coopmat2_props{};
  coopmat2_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  chain = nullptr;
  if (int_dot_known) link(chain, int_dot_props);
  if (size_control_known) link(chain, size_props);
  if (khr_coopmat) link(chain, coopmat_props);
  if (out.nv_coopmat2) link(chain, coopmat2_props);
  props.pNext = chain;
  vkGetPhysicalDeviceProperties2(device, &props);

  out.int_dot = int_dot.shaderIntegerDotProduct == VK_TRUE;
  out.int_dot_4x8_signed_accelerated =
      int_dot_props.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE;
  out.int_dot_4x8_mixed_accelerated =
      int_dot_props.integerDotProduct4x8BitPackedMixedSignednessAccelerated == VK_TRUE;
  out.int_dot_4x8_unsigned_accelerated =
      int_dot_props.integerDotProduct4x8BitPackedUnsignedAccelerated == VK_TRUE;

  out.subgroup_size_control = size_control.subgroupSizeControl == VK_TRUE;
  out.compute_full_subgroups = size_control.computeFullSubgroups == VK_TRUE;
  out.required_subgroup_size_in_compute =
      (size_props.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  out.min_subgroup_size = size_props.minSubgroupSize;
  out.max_subgroup_size = size_props.maxSubgroupSize;

  out.khr_coopmat = coopmat.cooperativeMatrix == VK_TRUE &&
                    (coopmat_props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  if (out.khr_coopmat) read_khr_shapes(instance, device, out);

  out.nv_coopmat2_features = {coopmat2.cooperativeMatrixWorkgroupScope == VK_TRUE,
                              coopmat2.cooperativeMatrixFlexibleDimensions == VK_TRUE,
                              coopmat2.cooperativeMatrixReductions == VK_TRUE,
                              coopmat2.cooperativeMatrixConversions == VK_TRUE,
                              coopmat2.cooperativeMatrixPerElementOperations == VK_TRUE,
                              coopmat2.cooperativeMatrixTensorAddressing == VK_TRUE,
                              coopmat2.cooperativeMatrixBlockLoads == VK_TRUE};
  out.nv_coopmat2_max_workgroup_size = coopmat2_props.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
  out.nv_coopmat2_max_dimension = coopmat2_props.cooperativeMatrixFlexibleDimensionsMaxDimension;
  out.nv_coopmat2_reserved_shared_memory = coopmat2_props.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
  if (out.nv_coopmat2 && out.nv_coopmat2_features.flexible_dimensions)
    read_flexible_shapes(instance, device, out);
  return out;
}

const char* component_type_name(VkComponentTypeKHR type) {
  switch (type) {
    case VK_COMPONENT_TYPE_FLOAT16_KHR:
      return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_KHR:
      return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_KHR:
      return "f64";
    case VK_COMPONENT_TYPE_SINT8_KHR:
      return "s8";
    case VK_COMPONENT_TYPE_SINT16_KHR:
      return "s16";
    case VK_COMPONENT_TYPE_SINT32_KHR:
      return "s32";
    case VK_COMPONENT_TYPE_SINT64_KHR:
      return "s64";
    case VK_COMPONENT_TYPE_UINT8_KHR:
      return "u8";
    case VK_COMPONENT_TYPE_UINT16_KHR:
      return "u16";
    case VK_COMPONENT_TYPE_UINT32_KHR:
      return "u32";
    case VK_COMPONENT_TYPE_UINT64_KHR:
      return "u64";
    default:
      break;
  }
  return "other";  // types of later extensions (bfloat16, fp8, packed 8-bit)
}

std::string describe_shape(const CoopMatShape& s) {
  std::string out = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " +
                    component_type_name(s.a) + "*" + component_type_name(s.b) + "+" +
                    component_type_name(s.c) + "->" + component_type_name(s.result);
  if (s.saturating) out += " sat";
  if (s.scope == VK_SCOPE_WORKGROUP_KHR) out += " workgroup";
  return out;
}

}  // namespace kvtrie::vk
