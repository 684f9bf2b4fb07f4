// Contract: ComputePipeline owns one compute pipeline built from an embedded SPIR-V variant (see
// shader_registry.h) with its specialization constants, plus its descriptor-set and pipeline layouts, all
// derived from the shader itself (spirv_reflect.h). PipelineCache owns every ComputePipeline of a device and
// the VkPipelineCache, keyed by (variant name, specialization constants); get() creates on first use.
// Pipelines returned by reference stay valid (and at the same address) until the cache is destroyed.
// Not thread-safe: the owner thread creates pipelines (normally all at load time, so the decode loop never
// creates one). The Device must outlive the cache.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/vk/handle.h"
#include "kernels/vk/spirv_reflect.h"

namespace kvtrie::vk {

class Device;

// Specialization constants by constant_id 0, 1, 2, ...; each is 32 bits (floats via std::bit_cast).
// By convention constant 0 is the work-group size in x (`layout(local_size_x_id = 0) in;`).
using SpecConstants = std::vector<uint32_t>;

class ComputePipeline {
 public:
  ComputePipeline(const Device& device, VkPipelineCache cache, std::string_view variant,
                  const SpecConstants& spec);

  const std::string& name() const { return name_; }
  const ShaderLayout& layout() const { return layout_; }
  const SpecConstants& spec() const { return spec_; }
  VkPipeline handle() const { return pipeline_.get(); }
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_.get(); }
  VkDescriptorSetLayout set_layout() const { return set_layout_.get(); }

 private:
  std::string name_;
  SpecConstants spec_;
  ShaderLayout layout_;
  // Member order is destruction order reversed: the pipeline goes before the layouts it was built with.
  DescriptorSetLayoutHandle set_layout_;
  PipelineLayoutHandle pipeline_layout_;
  PipelineHandle pipeline_;
};

class PipelineCache {
 public:
  explicit PipelineCache(const Device& device);

  // The pipeline for that variant and constants, created on first use. Throws kvtrie::Error when the
  // variant is not embedded.
  const ComputePipeline& get(std::string_view variant, const SpecConstants& spec = {});
  size_t size() const { return pipelines_.size(); }

 private:
  const Device* device_;
  PipelineCacheHandle cache_;
  std::map<std::pair<std::string, SpecConstants>, std::unique_ptr<ComputePipeline>, std::less<>> pipelines_;
};

}  // namespace kvtrie::vk
