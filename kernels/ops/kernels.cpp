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

const vk::ComputePipeline& Kernels::pipeline(std::string_view op, std::string_view variant) const {
  const OpRegistration& row = find(op);
  KVTRIE_CHECK(std::find(row.variants.begin(), row.variants.end(), variant) != row.variants.end(),
               "op " + std::string(op) + " has no registered variant " + std::string(variant));
  std::string name = std::string(op) + "_" + std::string(variant);
  return context_->pipelines().get(name, row.spec(context_->device()));
}

uint32_t Kernels::workgroup_size(std::string_view op) const {
  const vk::SpecConstants spec = find(op).spec(context_->device());
  KVTRIE_CHECK(!spec.empty(), "op " + std::string(op) + " has no work-group size constant");
  return spec[0];
}

}  // namespace kvtrie::kernels
