#include "kernels/vk/pipeline.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <utility>

#include "kernels/vk/device.h"
#include "kernels/vk/shader_registry.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

using Clock = std::chrono::steady_clock;

namespace {
const SpirvBlob& embedded(std::string_view variant) {
  const SpirvBlob* blob = find_spirv(variant);
  if (blob == nullptr)
    throw Error("no embedded shader variant '" + std::string(variant) +
                "' (see kernels/shaders/variants.cmake)");
  return *blob;
}
}  // namespace

ComputePipeline::ComputePipeline(const Device& device, VkPipelineCache cache, std::string_view variant,
                                 const SpecConstants& spec)
    : ComputePipeline(device, cache, embedded(variant), spec) {}

ComputePipeline::ComputePipeline(const Device& device, VkPipelineCache cache, const SpirvBlob& spirv,
                                 const SpecConstants& spec, VkPipelineCreateFlags flags)
    : name_(spirv.name), spec_(spec) {
  const SpirvBlob* blob = &spirv;
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
  info.flags = flags;
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

// One background batch: the workers take keys by index and leave each result (or failure) in its slot.
struct PipelineCache::Batch {
  std::vector<PipelineKey> keys;
  std::vector<std::unique_ptr<ComputePipeline>> results;
  std::vector<std::exception_ptr> errors;
  std::atomic<size_t> next{0};
  std::atomic<int64_t> last_done_ns{0};
  Clock::time_point started = Clock::now();
};

PipelineCache::PipelineCache(const Device& device, std::optional<std::filesystem::path> directory)
    : device_(&device), identity_(pipeline_cache_identity(device)) {
  CacheFileContents initial;
  if (directory) {
    file_ = *directory / pipeline_cache_file_name(identity_);
    initial = read_pipeline_cache_file(*file_, identity_);
    if (initial.status == CacheFileStatus::Corrupt || initial.status == CacheFileStatus::Mismatched)
      spdlog::warn("vulkan: pipeline cache {} ignored ({}: {})", file_->string(),
                   cache_file_status_name(initial.status), initial.reason);
    stats_.file_status = initial.status;
    stats_.file_bytes_loaded = initial.data.size();
  }
  VkPipelineCacheCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  info.initialDataSize = initial.data.size();
  info.pInitialData = initial.data.empty() ? nullptr : initial.data.data();
  VkPipelineCache cache;
  VkResult result = vkCreatePipelineCache(device.handle(), &info, nullptr, &cache);
  if (result != VK_SUCCESS && !initial.data.empty()) {
    // The driver refused data our header accepted: start empty rather than fail the load.
    spdlog::warn("vulkan: pipeline cache {} refused by the driver ({}); starting empty", file_->string(),
                 result_name(result));
    info.initialDataSize = 0;
    info.pInitialData = nullptr;
    result = vkCreatePipelineCache(device.handle(), &info, nullptr, &cache);
  }
  VK_CHECK(result);
  cache_ = PipelineCacheHandle(device.handle(), cache);
  saved_bytes_ = initial.data.size();
}

PipelineCache::~PipelineCache() {
  for (std::thread& t : workers_) t.join();  // their results are dropped with batch_
}

bool PipelineCache::contains(std::string_view variant, const SpecConstants& spec) const {
  return pipelines_.find(std::make_pair(std::string(variant), spec)) != pipelines_.end();
}

std::vector<PipelineKey> PipelineCache::keys() const {
  std::vector<PipelineKey> out;
  out.reserve(pipelines_.size());
  for (const auto& [key, pipeline] : pipelines_) out.push_back({key.first, key.second});
  return out;
}

const ComputePipeline& PipelineCache::get(std::string_view variant, const SpecConstants& spec) {
  if (background_pending()) finish_background();
  auto it = pipelines_.find(std::make_pair(std::string(variant), spec));
  return it != pipelines_.end() ? *it->second : get(embedded(variant), spec);
}

const ComputePipeline& PipelineCache::get(const SpirvBlob& blob, const SpecConstants& spec) {
  if (background_pending()) finish_background();
  auto key = std::make_pair(std::string(blob.name), spec);
  auto it = pipelines_.find(key);
  if (it == pipelines_.end()) {
    it = pipelines_
             .emplace(std::move(key), std::make_unique<ComputePipeline>(*device_, cache_.get(), blob, spec))
             .first;
    ++stats_.created;
  }
  return *it->second;
}

void PipelineCache::create_in_background(std::vector<PipelineKey> keys, unsigned threads) {
  if (background_pending()) finish_background();
  std::erase_if(keys, [&](const PipelineKey& k) { return contains(k.variant, k.spec); });
  if (keys.empty()) return;
  // Longest first (by SPIR-V size, a proxy for the driver's compile time): the slow shaders do not end up
  // alone at the tail of the batch.
  auto words = [](const PipelineKey& k) {
    const SpirvBlob* blob = find_spirv(k.variant);
    return blob ? blob->word_count : 0u;
  };
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const PipelineKey& a, const PipelineKey& b) { return words(a) > words(b); });
  batch_ = std::make_unique<Batch>();
  batch_->keys = std::move(keys);
  batch_->results.resize(batch_->keys.size());
  batch_->errors.resize(batch_->keys.size());
  if (threads == 0) threads = std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u);
  threads = std::min<unsigned>(threads, static_cast<unsigned>(batch_->keys.size()));
  Batch* batch = batch_.get();
  const Device* device = device_;
  const VkPipelineCache cache = cache_.get();
  for (unsigned t = 0; t < threads; ++t)
    workers_.emplace_back([batch, device, cache] {
      for (size_t i = batch->next++; i < batch->keys.size(); i = batch->next++) {
        try {
          batch->results[i] =
              std::make_unique<ComputePipeline>(*device, cache, batch->keys[i].variant, batch->keys[i].spec);
        } catch (...) {
          batch->errors[i] = std::current_exception();
        }
        const int64_t ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - batch->started).count();
        int64_t seen = batch->last_done_ns.load();
        while (ns > seen && !batch->last_done_ns.compare_exchange_weak(seen, ns)) {
        }
      }
    });
}

void PipelineCache::finish_background() {
  if (!background_pending()) return;
  const auto wait_start = Clock::now();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  stats_.background_wait_ms += std::chrono::duration<double, std::milli>(Clock::now() - wait_start).count();
  std::unique_ptr<Batch> batch = std::move(batch_);
  stats_.background_ms += static_cast<double>(batch->last_done_ns.load()) / 1e6;
  std::exception_ptr first_error;
  for (size_t i = 0; i < batch->keys.size(); ++i) {
    if (batch->errors[i] && !first_error) first_error = batch->errors[i];
    if (!batch->results[i]) continue;
    auto key = std::make_pair(std::move(batch->keys[i].variant), std::move(batch->keys[i].spec));
    if (pipelines_.emplace(std::move(key), std::move(batch->results[i])).second) {
      ++stats_.created;
      ++stats_.background_created;
    }
  }
  save();
  if (first_error) std::rethrow_exception(first_error);
}

bool PipelineCache::save() {
  if (!file_) return true;
  size_t size = 0;
  VK_CHECK(vkGetPipelineCacheData(device_->handle(), cache_.get(), &size, nullptr));
  if (size == saved_bytes_) return true;  // nothing new since it was read or written
  std::vector<std::byte> data(size);
  VK_CHECK(vkGetPipelineCacheData(device_->handle(), cache_.get(), &size, data.data()));
  data.resize(size);
  if (std::optional<std::string> error = write_pipeline_cache_file(*file_, identity_, data)) {
    spdlog::warn("vulkan: pipeline cache not saved: {}", *error);
    return false;
  }
  saved_bytes_ = size;
  ++stats_.files_written;
  spdlog::debug("vulkan: pipeline cache saved to {} ({} KiB)", file_->string(), size >> 10);
  return true;
}

}  // namespace kvtrie::vk
