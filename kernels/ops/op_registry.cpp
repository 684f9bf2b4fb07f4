#include "kernels/ops/op_registry.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <vector>

#include "base/error.h"
#include "kernels/vk/device.h"

namespace kvtrie::kernels {

namespace {

// The types of a set (TypeSet), in the manifest's order.
template <bool (*Pick)(const TensorTypeInfo&)>
constexpr auto types_where() {
  constexpr size_t n = std::count_if(std::begin(kAllTensorTypes), std::end(kAllTensorTypes), Pick);
  std::array<TensorType, n> types{};
  size_t i = 0;
  for (const TensorTypeInfo& t : kAllTensorTypes)
    if (Pick(t)) types[i++] = t.type;
  return types;
}
constexpr bool every_type(const TensorTypeInfo&) {
  return true;
}
constexpr bool tiled_type(const TensorTypeInfo& t) {
  return t.tiled;
}
constexpr auto kAllTypes = types_where<every_type>();
constexpr auto kTiledTypes = types_where<tiled_type>();

uint32_t named_variants(const OpRegistration& row) {
  return std::max<uint32_t>(1, static_cast<uint32_t>(row.variants.size()));
}

}  // namespace

std::span<const OpRegistration* const> registered_ops() {
  static const std::vector<const OpRegistration*> rows = [] {
    std::vector<const OpRegistration*> all;
    for (OpFileRows file : op_files())
      for (const OpRegistration* row : file()) all.push_back(row);
    return all;
  }();
  return rows;
}

std::span<const TensorType> types_of(TypeSet set) {
  switch (set) {
    case TypeSet::None:
      return {};
    case TypeSet::All:
      return kAllTypes;
    case TypeSet::Tiled:
      return kTiledTypes;
  }
  throw Error("unknown type set");
}

uint32_t variant_count(const OpRegistration& row) {
  const size_t types = types_of(row.types).size();
  return named_variants(row) * static_cast<uint32_t>(types == 0 ? 1 : types);
}

uint32_t typed_variant(const OpRegistration& row, TensorType type, uint32_t variant) {
  const std::span<const TensorType> types = types_of(row.types);
  const auto it = std::find(types.begin(), types.end(), type);
  KVTRIE_CHECK(it != types.end(), std::string(row.op) + " has no build for " +
                                      std::string(tensor_type_info(type).name) + " weights");
  return variant * static_cast<uint32_t>(types.size()) + static_cast<uint32_t>(it - types.begin());
}

bool registers(const OpRegistration& row, uint32_t index) {
  if (index >= variant_count(row)) return false;
  const size_t types = std::max<size_t>(1, types_of(row.types).size());
  const uint32_t variant = static_cast<uint32_t>(index / types);
  return variant >= 32 || (row.variant_mask >> variant & 1u) != 0;
}

std::string shader_variant(const OpRegistration& row, uint32_t index) {
  const std::span<const TensorType> types = types_of(row.types);
  const size_t per_variant = std::max<size_t>(1, types.size());
  std::string name(row.shader.empty() ? row.op : row.shader);
  if (!row.variants.empty()) (name += '_') += row.variants[index / per_variant];
  if (!types.empty()) (name += '_') += tensor_type_info(types[index % per_variant]).variant;
  return name;
}

std::optional<TensorType> variant_type(const OpRegistration& row, uint32_t index) {
  const std::span<const TensorType> types = types_of(row.types);
  if (types.empty()) return std::nullopt;
  return types[index % types.size()];
}

const char* type_variant(TensorType type) {
  return tensor_type_info(type).variant.data();  // a literal of the manifest: null-terminated
}

vk::SpecConstants spec_elementwise(const vk::Device& d) {
  return {std::min(128u, d.info().max_workgroup_size_x)};
}

uint32_t workgroup_up_to(const vk::Device& d, uint32_t size) {
  while (size > d.info().max_workgroup_size_x || size > d.info().max_workgroup_invocations) size /= 2;
  return size;
}

vk::SpecConstants spec_row_reduce(const vk::Device& d) {
  return {workgroup_up_to(d, 256)};
}

vk::SpecConstants spec_none(const vk::Device&) {
  return {};
}

}  // namespace kvtrie::kernels
