// Contract: QueryPool owns a VkQueryPool of timestamp queries for profiling dispatches. The recorder resets
// and writes them (CommandRecorder::reset_queries / timestamp); results() reads them after the submission
// completed, in nanoseconds since an arbitrary origin. Not thread-safe; the Device must outlive it.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <vector>

#include "kernels/vk/handle.h"

namespace kvtrie::vk {

class Device;

class QueryPool {
 public:
  QueryPool(const Device& device, uint32_t count);

  VkQueryPool handle() const { return pool_.get(); }
  uint32_t count() const { return count_; }
  // Timestamps [0, n) in nanoseconds (waits for them to be available).
  std::vector<double> results_ns(uint32_t n) const;

 private:
  const Device* device_;
  QueryPoolHandle pool_;
  uint32_t count_;
};

}  // namespace kvtrie::vk
