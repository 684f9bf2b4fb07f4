#include "kernels/vk/pipeline.h"

#include <string>

#include "kernels/vk/device.h"
#include "kernels/vk/shader_registry.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

ComputePipeline::ComputePipeline(const Device& device, VkPipelineCache cache, std::string_view variant,
                                 const SpecConstants& spec)
    : name_(variant), spec_(spec) {
  const SpirvBlob* blob = find_spirv(variant);
  if (blob == nullptr)
    throw Error("no embedded shader variant '" + name_ + "' (see kernels/shaders/variants.cmake)");
  layout_ = reflect_spirv({blob->words, blob->word_count});
  KVTRIE_CHECK(layout_.push_constant_size <= device.info().max_push_constants,
               name_ + ": push constants exceed the device limit");
  const VkDevice dev = device.handle();

  std::vector<VkDescriptorSetLayoutBinding> bindings(layout_.binding_count);
  for (uint32_t i = 0; i < layout_.binding_count; ++i) {
    bindings[i] = {};
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = layout_.binding_count;
  set_info.pBindings = bindings.data();
  VkDescriptorSetLayout set_layout;
  VK_CHECK(vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &set_layout));
  set_layout_ = DescriptorSetLayoutHandle(dev, set_layout);

  VkPushConstantRange push{};
  push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push.size = layout_.push_constant_size;
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout;
  layout_info.pushConstantRangeCount = push.size > 0 ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  VkPipelineLayout pipeline_layout;
  VK_CHECK(vkCreatePipelineLayout(dev, &layout_info, nullptr, &pipeline_layout));
  pipeline_layout_ = PipelineLayoutHandle(dev, pipeline_layout);

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = blob->word_count * sizeof(uint32_t);
  module_info.pCode = blob->words;
  VkShaderModule module_raw;
  VK_CHECK(vkCreateShaderModule(dev, &module_info, nullptr, &module_raw));
  ShaderModuleHandle module(dev, module_raw);  // only needed while the pipeline is created

  std::vector<VkSpecializationMapEntry> entries(spec_.size());
  for (uint32_t i = 0; i < spec_.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo spec_info{};
  spec_info.mapEntryCount = static_cast<uint32_t>(entries.size());
  spec_info.pMapEntries = entries.data();
  spec_info.dataSize = spec_.size() * sizeof(uint32_t);
  spec_info.pData = spec_.data();

  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module.get();
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = spec_.empty() ? nullptr : &spec_info;
  info.layout = pipeline_layout;
  VkPipeline pipeline;
  VK_CHECK(vkCreateComputePipelines(dev, cache, 1, &info, nullptr, &pipeline));
  pipeline_ = PipelineHandle(dev, pipeline);
}

PipelineCache::PipelineCache(const Device& device) : device_(&device) {
  VkPipelineCacheCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  VkPipelineCache cache;
  VK_CHECK(vkCreatePipelineCache(device.handle(), &info, nullptr, &cache));
  cache_ = PipelineCacheHandle(device.handle(), cache);
}

const ComputePipeline& PipelineCache::get(std::string_view variant, const SpecConstants& spec) {
  auto key = std::make_pair(std::string(variant), spec);
  auto it = pipelines_.find(key);
  if (it == pipelines_.end())
    it =
        pipelines_
            .emplace(std::move(key), std::make_unique<ComputePipeline>(*device_, cache_.get(), variant, spec))
            .first;
  return *it->second;
}

}  // namespace kvtrie::vk
