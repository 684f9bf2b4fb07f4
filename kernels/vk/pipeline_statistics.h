// Contract: the driver's statistics of a compiled compute shader (VK_KHR_pipeline_executable_properties),
// for the tuning tools: registers a thread, shared memory, instruction counts, as the driver names them
// (NVIDIA reports a register count, from which the work groups a multiprocessor holds follow). Each call
// builds a throwaway pipeline with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR and no pipeline cache, so
// it never touches the engine's pipelines. Throws kvtrie::Error where the device does not have the extension
// enabled (Device::pipeline_statistics_enabled()). Any thread that may create pipelines.
#pragma once
#include <string>
#include <vector>

#include "kernels/vk/pipeline.h"

namespace kvtrie::vk {

struct ExecutableStatistic {
  std::string executable;  // the driver's name of the compiled stage, e.g. "Compute Shader"
  std::string name;        // e.g. "Register Count"
  std::string value;       // formatted: an integer, a float or "true"/"false"
};

std::vector<ExecutableStatistic> pipeline_statistics(const Device& device, const SpirvBlob& blob,
                                                     const SpecConstants& spec);

}  // namespace kvtrie::vk
