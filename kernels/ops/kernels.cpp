#include "kernels/ops/kernels.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvtrie::kernels {

std::vector<vk::PipelineKey> Kernels::prewarm_keys(const vk::Device& device,
                                                   std::optional<std::span<const TensorType>> weight_types) {
  std::vector<TensorType> wanted_types;
  if (weight_types) {
    wanted_types.push_back(TensorType::F32);  // activations (e.g. gathering rows of x)
    wanted_types.insert(wanted_types.end(), weight_types->begin(), weight_types->end());
  }
  std::vector<vk::PipelineKey> keys;
  for (const OpRegistration* row : registered_ops()) {
    if (row->available && !row->available(device)) continue;  // e.g. cooperative matrices
    const vk::SpecConstants spec = row->spec(device);
    for (uint32_t i = 0; i < variant_count(*row); ++i) {
      if (!registers(*row, i)) continue;
      // A typed row's variants of other types than the model's are left out; untyped rows are whole.
      const std::optional<TensorType> type = variant_type(*row, i);
      if (weight_types && type &&
          std::find(wanted_types.begin(), wanted_types.end(), *type) == wanted_types.end())
        continue;
      keys.push_back({shader_variant(*row, i), spec});
    }
  }
  return keys;
}

Kernels::Kernels(vk::Context& context, Prewarm prewarm)
    : context_(&context), prewarmed_(prewarm == Prewarm::Yes) {
  if (prewarm == Prewarm::No) return;
  context.pipelines().create_in_background(prewarm_keys(context.device(), std::nullopt));
}

Kernels::Kernels(vk::Context& context, std::span<const TensorType> weight_types)
    : context_(&context), prewarmed_(true) {
  context.pipelines().create_in_background(prewarm_keys(context.device(), weight_types));
}

void Kernels::finish_prewarm() const {
  context_->pipelines().finish_background();
}

Kernels::Resolved& Kernels::resolved(const OpRegistration& row) const {
  for (Resolved& r : resolved_)
    if (r.row == &row) return r;
  return resolved_.emplace_back(Resolved{&row, std::vector<const vk::ComputePipeline*>(variant_count(row))});
}

const vk::ComputePipeline& Kernels::pipeline(const OpRegistration& row, uint32_t variant) const {
  Resolved& r = resolved(row);
  if (variant < r.pipelines.size() && r.pipelines[variant] != nullptr) return *r.pipelines[variant];
  KVTRIE_CHECK(registers(row, variant),
               "op " + std::string(row.op) + " has no registered variant " + std::to_string(variant));
  const std::string name = shader_variant(row, variant);
  const vk::SpecConstants spec = row.spec(context_->device());
  vk::PipelineCache& cache = context_->pipelines();
  if (prewarmed_) {
    cache.finish_background();
    if (!cache.contains(name, spec)) {
      ++created_after_prewarm_;
      spdlog::warn("kernels: pipeline {} was not prewarmed; created on first use", name);
    }
  }
  if (row.spirv != nullptr) {
    const vk::SpirvBlob* blob = row.spirv(name);
    KVTRIE_CHECK(blob != nullptr, "op " + std::string(row.op) + ": no embedded shader variant " + name);
    r.pipelines[variant] = &cache.get(*blob, spec);
  } else {
    r.pipelines[variant] = &cache.get(name, spec);
  }
  return *r.pipelines[variant];
}

uint32_t Kernels::workgroup_size(const OpRegistration& row) const {
  for (const Resolved& r : resolved_)
    if (r.row == &row)
      for (const vk::ComputePipeline* p : r.pipelines)
        if (p != nullptr && !p->spec().empty()) return p->spec()[0];
  const vk::SpecConstants spec = row.spec(context_->device());
  KVTRIE_CHECK(!spec.empty(), "op " + std::string(row.op) + " has no work-group size constant");
  return spec[0];
}

}  // namespace kvtrie::kernels
