// Contract: ComputePipeline owns one compute pipeline built from an embedded SPIR-V variant (see
// shader_registry.h) with its specialization constants, plus its descriptor-set and pipeline layouts, all
// derived from the shader itself (spirv_reflect.h). PipelineCache owns every ComputePipeline of a device and
// the VkPipelineCache, keyed by (variant name, specialization constants); get() creates on first use.
// Pipelines returned by reference stay valid (and at the same address) until the cache is destroyed.
// Not thread-safe: the owner thread creates pipelines (normally all at load time, so the decode loop never
// creates one). The Device must outlive the cache.
//
// Load time: create_in_background() builds a batch of pipelines on worker threads while the owner thread
// does other work (weight upload); the workers touch only their own ComputePipeline objects and the
// VkPipelineCache (internally synchronized by the driver). finish_background() - also called by get() and
// the destructor - joins them and adopts the results on the owner thread.
// Disk: with a file (see pipeline_cache_file.h), the VkPipelineCache starts from that file's data and
// finish_background() writes it back when it grew, so a restarted process skips the driver's compilation.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/vk/handle.h"
#include "kernels/vk/pipeline_cache_file.h"
#include "kernels/vk/spirv_reflect.h"

namespace kvtrie::vk {

class Device;
struct SpirvBlob;

// Specialization constants by constant_id 0, 1, 2, ...; each is 32 bits (floats via std::bit_cast).
// By convention constant 0 is the work-group size in x (`layout(local_size_x_id = 0) in;`).
using SpecConstants = std::vector<uint32_t>;

class ComputePipeline {
 public:
  ComputePipeline(const Device& device, VkPipelineCache cache, std::string_view variant,
                  const SpecConstants& spec);
  // From a blob embedded elsewhere than kernels/ (bench/'s probes); `flags` for the tuning tools
  // (pipeline_statistics.h: VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR).
  ComputePipeline(const Device& device, VkPipelineCache cache, const SpirvBlob& blob,
                  const SpecConstants& spec, VkPipelineCreateFlags flags = 0);

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

struct PipelineKey {
  std::string variant;
  SpecConstants spec;
};

// What the cache did, for the load log and tests.
struct PipelineCacheStats {
  uint32_t created = 0;             // pipelines created so far (background ones included once adopted)
  uint32_t background_created = 0;  // of those, in background batches
  double background_ms = 0;         // wall time of the background batches, start to last pipeline
  double background_wait_ms = 0;    // how long the owner thread blocked in finish_background()
  CacheFileStatus file_status = CacheFileStatus::Absent;  // of the file read at construction
  uint64_t file_bytes_loaded = 0;
  uint32_t files_written = 0;
};

class PipelineCache {
 public:
  // `directory`: where the on-disk cache file of this device, driver and build is read from and written to
  // (nullopt: memory only). A corrupt or mismatched file is ignored with a warning.
  explicit PipelineCache(const Device& device, std::optional<std::filesystem::path> directory = std::nullopt);
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  // The pipeline for that variant and constants, created on first use. Throws kvtrie::Error when the
  // variant is not embedded. Waits for a background batch first.
  const ComputePipeline& get(std::string_view variant, const SpecConstants& spec = {});
  // The same for a variant embedded elsewhere (keyed by its name: names must not repeat kernels/' own).
  const ComputePipeline& get(const SpirvBlob& blob, const SpecConstants& spec = {});
  size_t size() const { return pipelines_.size(); }
  bool contains(std::string_view variant, const SpecConstants& spec) const;
  // Every pipeline created so far (adopted background ones included), in key order.
  std::vector<PipelineKey> keys() const;

  // Starts creating the keys not in the cache yet on up to `threads` worker threads (0: from the CPU
  // count). One batch at a time: a pending batch is finished first.
  void create_in_background(std::vector<PipelineKey> keys, unsigned threads = 0);
  // Joins the pending batch (no-op without one), adopts its pipelines and writes the disk cache when it
  // grew. Rethrows the first creation failure (the other pipelines of the batch are still adopted).
  void finish_background();
  bool background_pending() const { return !workers_.empty(); }

  // Writes the disk cache now (no-op without a file); false when the write failed (logged).
  bool save();
  const std::optional<std::filesystem::path>& file() const { return file_; }
  const PipelineCacheStats& stats() const { return stats_; }

 private:
  struct Batch;

  const Device* device_;
  std::optional<std::filesystem::path> file_;
  PipelineCacheIdentity identity_;
  PipelineCacheHandle cache_;
  uint64_t saved_bytes_ = 0;  // size of the cache data last read or written
  std::map<std::pair<std::string, SpecConstants>, std::unique_ptr<ComputePipeline>, std::less<>> pipelines_;
  std::unique_ptr<Batch> batch_;
  std::vector<std::thread> workers_;  // joined by the destructor before any member goes
  PipelineCacheStats stats_;
};

}  // namespace kvtrie::vk
