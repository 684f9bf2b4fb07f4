// Contract: Context is the entry point of the Vulkan backend: it owns the Instance, the Device chosen on it,
// the PipelineCache and the retire list, in that member order so that destruction runs in reverse (retired
// resources and pipelines go before the device, the device before the instance). Pass it by reference to
// whatever needs the GPU (kernels::Kernels, CommandRecorder, staging helpers); it is neither copyable nor
// movable because those hold pointers into it. Not thread-safe: one owner thread (the engine) uses it.
//
// Retire list: a resource that a submitted-but-unfinished command buffer may still use is handed to
// retire(); it is destroyed once every submission in flight at that moment has completed (checked whenever
// a recorder waits on its fence, and at destruction).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "kernels/vk/device.h"
#include "kernels/vk/instance.h"
#include "kernels/vk/physical_device.h"
#include "kernels/vk/pipeline.h"

namespace kvtrie::vk {

struct ContextOptions {
  std::optional<uint32_t> device_index;  // --device N; default: discrete > integrated > CPU
  bool validation = false;               // also on with KVTRIE_VALIDATION=1
  bool pipeline_statistics = false;      // Device's pipeline_statistics (the tuning tools)
  // The on-disk pipeline cache lives in pipeline_cache_dir() (pipeline_cache_file.h:
  // $KVTRIE_PIPELINE_CACHE_DIR, else $XDG_CACHE_HOME/kvtrie, else ~/.cache/kvtrie;
  // KVTRIE_PIPELINE_CACHE_DIR=off disables it).
};

class Context {
 public:
  // Throws kvtrie::Error when there is no Vulkan device (or the index is out of range).
  explicit Context(ContextOptions options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&&) = delete;
  Context& operator=(Context&&) = delete;

  const Instance& instance() const { return instance_; }
  const Device& device() const { return device_; }
  PipelineCache& pipelines() { return pipelines_; }

  // Destroy `resource` once the work in flight now has completed (at once when nothing is in flight).
  // Pass by move: ctx.retire(std::move(buffer)).
  template <typename T>
  void retire(T resource) {
    if (in_flight_.empty()) return;  // nothing can use it: the parameter is destroyed right here
    retired_.push_back({*in_flight_.rbegin(), std::make_unique<Holder<T>>(std::move(resource))});
  }
  size_t retired_pending() const { return retired_.size(); }

  // Submission bookkeeping used by CommandRecorder: a serial per submit, marked complete after its fence.
  uint64_t begin_submission();
  void end_submission(uint64_t serial);

 private:
  struct Retired {
    virtual ~Retired() = default;
  };
  template <typename T>
  struct Holder final : Retired {
    explicit Holder(T&& v) : value(std::move(v)) {}
    T value;
  };
  struct Entry {
    uint64_t last_serial;  // freed when no submission <= this is in flight
    std::unique_ptr<Retired> resource;
  };
  void drain();

  Instance instance_;
  Device device_;
  PipelineCache pipelines_;
  std::set<uint64_t> in_flight_;
  uint64_t next_serial_ = 1;
  std::vector<Entry> retired_;  // declared last: destroyed first, while the device still exists
};

}  // namespace kvtrie::vk
