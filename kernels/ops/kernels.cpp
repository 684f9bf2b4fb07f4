#include "kernels/ops/kernels.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvtrie::kernels {

namespace {

// A row indexed by weight type lists a variant for every type kvtrie supports (new fused ops over weights
// do too); rows listing fewer variants are prewarmed whole, so a new row is never left out.
bool indexed_by_weight_type(const OpRegistration& row) {
  for (const TensorTypeInfo& info : kTensorTypes)
    if (std::find(row.variants.begin(), row.variants.end(), type_variant(info.type)) == row.variants.end())
      return false;
  return true;
}

// The shader variant a row's variant names.
std::string shader_variant(const OpRegistration& row, std::string_view variant) {
  return std::string(row.shader.empty() ? row.op : row.shader) + "_" + std::string(variant);
}

// Whether a prewarm for these weight types wants this variant of the row.
bool wanted(const OpRegistration& row, std::string_view variant, std::span<const std::string_view> types) {
  if (indexed_by_weight_type(row)) return std::find(types.begin(), types.end(), variant) != types.end();
  if (!row.variants_end_in_type) return true;
  return std::any_of(types.begin(), types.end(), [&](std::string_view t) {
    return variant == t || (variant.size() > t.size() && variant.ends_with(t) &&
                            variant[variant.size() - t.size() - 1] == '_');
  });
}

}  // namespace

std::vector<vk::PipelineKey> Kernels::prewarm_keys(const vk::Device& device,
                                                   std::optional<std::span<const TensorType>> weight_types) {
  std::vector<std::string_view> wanted_types;
  if (weight_types) {
    wanted_types.push_back(type_variant(TensorType::F32));  // activations (e.g. gathering rows of x)
    for (TensorType t : *weight_types) wanted_types.push_back(type_variant(t));
  }
  std::vector<vk::PipelineKey> keys;
  for (const OpRegistration& row : registered_ops()) {
    if (row.benchmark_only || (row.available && !row.available(device)))
      continue;  // e.g. cooperative matrices
    const vk::SpecConstants spec = row.spec(device);
    for (std::string_view variant : row.variants) {
      if (weight_types && !wanted(row, variant, wanted_types)) continue;
      keys.push_back({shader_variant(row, variant), spec});
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

const OpRegistration& Kernels::find(std::string_view op) const {
  for (const OpRegistration& row : registered_ops())
    if (row.op == op) return row;
  throw Error("op '" + std::string(op) + "' is not in the registration table (kernels/ops/op_registry.cpp)");
}

const Kernels::Entry& Kernels::resolve(std::string_view op, std::string_view variant) const {
  for (const Entry& e : entries_)
    if (e.op == op && e.variant == variant) return e;
  const OpRegistration& row = find(op);
  auto it = std::find(row.variants.begin(), row.variants.end(), variant);
  KVTRIE_CHECK(it != row.variants.end(),
               "op " + std::string(op) + " has no registered variant " + std::string(variant));
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
  const vk::ComputePipeline& p = cache.get(name, spec);
  entries_.push_back({row.op, *it, &p});
  return entries_.back();
}

const vk::ComputePipeline& Kernels::pipeline(std::string_view op, std::string_view variant) const {
  return *resolve(op, variant).pipeline;
}

uint32_t Kernels::workgroup_size(std::string_view op) const {
  for (const Entry& e : entries_)
    if (e.op == op && !e.pipeline->spec().empty()) return e.pipeline->spec()[0];
  const vk::SpecConstants spec = find(op).spec(context_->device());
  KVTRIE_CHECK(!spec.empty(), "op " + std::string(op) + " has no work-group size constant");
  return spec[0];
}

}  // namespace kvtrie::kernels
