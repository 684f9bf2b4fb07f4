// Contract: Kernels is the set of compute ops available on one vk::Context: it reads the single op
// registration table (op_registry.cpp), and hands ops their pipelines by (op, variant), e.g.
// pipeline("rms_norm", "f32") -> shader variant "rms_norm_f32" (the row's shader prefix instead of the op
// where it names one) with the spec constants the table row computes from the device (work-group size from
// the device, never a fixed 32). With Prewarm::Yes (the engine) every registered pipeline the device can run
// is created up front, so the decode loop never creates one; tests use Prewarm::No and pipelines are created
// on first use. With a list of weight types, only what a model of those types needs is created: every variant
// of the rows not indexed by weight type, and, of the rows that list a variant for every weight type
// (get_rows, matvec, matmul, ...), those types' variants plus f32. The prewarm runs on worker threads in the
// background (vk::PipelineCache::create_in_background): the caller overlaps it with the weight upload and
// waits with finish_prewarm() (pipeline() waits too). Not thread-safe (owner thread); the Context must
// outlive it. Pipelines returned stay valid as long as the Context.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/tensor_type.h"
#include "kernels/vk/context.h"
#include "kernels/vk/pipeline.h"

namespace kvtrie::kernels {

// One row of the registration table: an op, the variants its shader is compiled in (listed in
// shaders/variants.cmake as <op>_<variant>), and the specialization constants for a device.
struct OpRegistration {
  std::string_view op;
  std::span<const std::string_view> variants;
  vk::SpecConstants (*spec)(const vk::Device& device);
  // Whether the device can run this op (nullptr: every device); rows it cannot run are not prewarmed.
  bool (*available)(const vk::Device& device) = nullptr;
  // The shader variants' name prefix when it is not the op's (several rows specializing one shader).
  std::string_view shader = {};
  // Every variant ends in _<weight type>: a prewarm for a model keeps only its types' variants.
  bool variants_end_in_type = false;
  // Probes and tuning builds for the benchmarks: never prewarmed (created on first use).
  bool benchmark_only = false;
};

// The shader variant suffix of a tensor type ("q4_k"), shared with the matrix ops.
const char* type_variant(TensorType type);

// The table (defined in op_registry.cpp).
std::span<const OpRegistration> registered_ops();

enum class Prewarm { No, Yes };

class Kernels {
 public:
  explicit Kernels(vk::Context& context, Prewarm prewarm = Prewarm::Yes);
  // Prewarms what a model with these weight types needs (see the contract).
  Kernels(vk::Context& context, std::span<const TensorType> weight_types);

  // The pipelines a prewarm creates on this device: all (nullopt) or for these weight types.
  static std::vector<vk::PipelineKey> prewarm_keys(const vk::Device& device,
                                                   std::optional<std::span<const TensorType>> weight_types);
  // Waits until the prewarmed pipelines exist (rethrows a creation failure).
  void finish_prewarm() const;
  // Pipelines a prewarmed Kernels had to create on first use (each logged as a warning): they were missing
  // from the prewarm selection, and the step that first used them paid for their creation.
  uint32_t created_after_prewarm() const { return created_after_prewarm_; }

  vk::Context& context() const { return *context_; }
  const vk::Device& device() const { return context_->device(); }
  // The pipeline of `op`_`variant`; throws kvtrie::Error when the op or variant is not registered.
  const vk::ComputePipeline& pipeline(std::string_view op, std::string_view variant) const;
  // The work-group size (spec constant 0) of that op's table row on this device.
  uint32_t workgroup_size(std::string_view op) const;

 private:
  // A resolved (op, variant): looked up without allocating, so recording a step allocates nothing.
  struct Entry {
    std::string_view op, variant;  // views of the static table
    const vk::ComputePipeline* pipeline;
  };
  const OpRegistration& find(std::string_view op) const;
  const Entry& resolve(std::string_view op, std::string_view variant) const;

  vk::Context* context_;
  bool prewarmed_ = false;
  mutable uint32_t created_after_prewarm_ = 0;
  mutable std::vector<Entry> entries_;
};

}  // namespace kvtrie::kernels
