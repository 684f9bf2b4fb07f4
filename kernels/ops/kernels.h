// Contract: Kernels is the set of compute ops available on one vk::Context: ops ask it for their pipelines
// by registration row (op_registry.h) and variant index, e.g. pipeline(kRmsNorm, kAddF32) -> shader
// variant "rms_norm_add_f32", pipeline(kGetRows, TensorType::Q4_K) -> "get_rows_q4_k", with the spec
// constants the row computes from the device (work-group size from the device, never a fixed 32). A pipeline
// is looked up by name once per Kernels; later calls are an index into what was resolved. With Prewarm::Yes
// (the engine) every pipeline of the registered rows (registered_ops()) the device can run is created up
// front, so the decode loop never creates one; tests use Prewarm::No and pipelines are created on first use.
// With a list of weight types, only what a model of those types needs is created: every variant of the
// untyped rows, and of the typed rows (get_rows, matvec, matmul, ...) those types' variants plus f32. The
// prewarm runs on worker threads in the background (vk::PipelineCache::create_in_background): the caller
// overlaps it with the weight upload and waits with finish_prewarm() (pipeline() waits too). Not
// thread-safe (owner thread); the Context must outlive it. Pipelines returned stay valid as long as the
// Context.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/tensor_type.h"
#include "kernels/ops/op_registry.h"
#include "kernels/vk/context.h"
#include "kernels/vk/pipeline.h"

namespace kvtrie::kernels {

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
  // The pipeline of a row's variant index (op_registry.h: an untyped row's variant, or typed_variant()).
  // Throws kvtrie::Error for an index the row does not register.
  const vk::ComputePipeline& pipeline(const OpRegistration& row, uint32_t variant = 0) const;
  // A typed row's build of variant `variant` for weights of `type`.
  const vk::ComputePipeline& pipeline(const OpRegistration& row, TensorType type,
                                      uint32_t variant = 0) const {
    return pipeline(row, typed_variant(row, type, variant));
  }
  // The work-group size (spec constant 0) of that row on this device.
  uint32_t workgroup_size(const OpRegistration& row) const;

 private:
  // A row's pipelines by variant index, filled on first use: recording a step allocates nothing.
  struct Resolved {
    const OpRegistration* row;
    std::vector<const vk::ComputePipeline*> pipelines;
  };
  Resolved& resolved(const OpRegistration& row) const;

  vk::Context* context_;
  bool prewarmed_ = false;
  mutable uint32_t created_after_prewarm_ = 0;
  mutable std::vector<Resolved> resolved_;
};

}  // namespace kvtrie::kernels
