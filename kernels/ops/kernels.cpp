#include "kernels/ops/kernels.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace kvtrie::kernels {

Kernels::Kernels(vk::Context& context, Prewarm prewarm) : context_(&context) {
  if (prewarm == Prewarm::No) return;
  for (const OpRegistration& row : registered_ops()) {
    if (row.available && !row.available(context.device())) continue;  // e.g. cooperative matrices
    for (std::string_view variant : row.variants) pipeline(row.op, variant);
  }
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
  const std::string name = std::string(op) + "_" + std::string(variant);
  const vk::ComputePipeline& p = context_->pipelines().get(name, row.spec(context_->device()));
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
