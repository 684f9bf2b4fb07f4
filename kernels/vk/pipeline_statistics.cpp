#include "kernels/vk/pipeline_statistics.h"

#include <cstdio>

#include "base/error.h"
#include "kernels/vk/device.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

namespace {
template <typename Fn>
Fn device_function(VkDevice device, const char* name) {
  auto fn = reinterpret_cast<Fn>(vkGetDeviceProcAddr(device, name));
  KVTRIE_CHECK(fn != nullptr, std::string("pipeline statistics: the driver has no ") + name);
  return fn;
}

std::string format_value(const VkPipelineExecutableStatisticKHR& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
      return s.value.b32 == VK_TRUE ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
      return std::to_string(s.value.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
      return std::to_string(s.value.u64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: {
      char text[32];
      std::snprintf(text, sizeof text, "%g", s.value.f64);
      return text;
    }
    default:
      return "?";
  }
}
}  // namespace

std::vector<ExecutableStatistic> pipeline_statistics(const Device& device, const SpirvBlob& blob,
                                                     const SpecConstants& spec) {
  KVTRIE_CHECK(device.pipeline_statistics_enabled(),
               "pipeline statistics: VK_KHR_pipeline_executable_properties is not enabled (asked for by "
               "ContextOptions::pipeline_statistics, where the device offers it)");
  const VkDevice dev = device.handle();
  const auto get_properties =
      device_function<PFN_vkGetPipelineExecutablePropertiesKHR>(dev, "vkGetPipelineExecutablePropertiesKHR");
  const auto get_statistics =
      device_function<PFN_vkGetPipelineExecutableStatisticsKHR>(dev, "vkGetPipelineExecutableStatisticsKHR");
  const ComputePipeline pipeline(device, VK_NULL_HANDLE, blob, spec,
                                 VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR);

  VkPipelineInfoKHR info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR;
  info.pipeline = pipeline.handle();
  uint32_t count = 0;
  VK_CHECK(get_properties(dev, &info, &count, nullptr));
  std::vector<VkPipelineExecutablePropertiesKHR> executables(count);
  for (auto& e : executables) e.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
  VK_CHECK(get_properties(dev, &info, &count, executables.data()));

  std::vector<ExecutableStatistic> out;
  for (uint32_t i = 0; i < count; ++i) {
    VkPipelineExecutableInfoKHR which{};
    which.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
    which.pipeline = pipeline.handle();
    which.executableIndex = i;
    uint32_t n = 0;
    VK_CHECK(get_statistics(dev, &which, &n, nullptr));
    std::vector<VkPipelineExecutableStatisticKHR> stats(n);
    for (auto& s : stats) s.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    VK_CHECK(get_statistics(dev, &which, &n, stats.data()));
    for (uint32_t j = 0; j < n; ++j)
      out.push_back({executables[i].name, stats[j].name, format_value(stats[j])});
  }
  return out;
}

}  // namespace kvtrie::vk
