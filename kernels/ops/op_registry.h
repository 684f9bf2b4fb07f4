// Contract: how an op tells Kernels (kernels.h) about its pipelines, and the list of kernels/' ops.
// An op's .cpp describes its pipelines as OpRegistration rows (constexpr data: the shader variants, as built
// by kernels/shaders/variants.cmake, and the specialization constants a device gets) and names them once in
// KVTRIE_REGISTER_OPS(<file name>, &row, ...). The build collects those lines (cmake/op_list.cmake) into
// registered_ops(): no table lists every op, and the engine's prewarm covers every row listed. Dispatch code
// passes the row itself and a variant index (an enum of the op, or a tensor type) to Kernels::pipeline():
// a pipeline's name is built once per Kernels, at its first use, and never compared at a dispatch.
// Rows outside that list work the same way and are never prewarmed: bench/ describes its probe shaders so,
// with `spirv` naming where their SPIR-V is embedded. Everything here is immutable data and pure functions,
// usable from any thread; rows live as long as the program (static storage).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/tensor_type.h"
#include "kernels/vk/pipeline.h"
#include "kernels/vk/shader_registry.h"

namespace kvtrie::vk {
class Device;
}

namespace kvtrie::kernels {

// The weight types a row's variants are built for (base/tensor_types.def): each variant once per type,
// named <shader>_<variant>_<type> (<shader>_<type> for a row without variants).
enum class TypeSet : uint8_t {
  None,   // the variants as listed
  All,    // every type (kAllTensorTypes)
  Tiled,  // the types whose blocks load 16 values at a time (TensorTypeInfo::tiled)
};

// One registered row: an op, its shader variants and the specialization constants for a device.
struct OpRegistration {
  std::string_view op = {};  // its name in logs and errors
  // Shader variants <shader>_<variant> (listed in kernels/shaders/variants.cmake); typed rows: the part of
  // the name before the type, none for one nameless variant.
  std::span<const std::string_view> variants = {};
  vk::SpecConstants (*spec)(const vk::Device& device) = nullptr;
  // Whether the device can run this op (nullptr: every device); rows it cannot run are not prewarmed.
  bool (*available)(const vk::Device& device) = nullptr;
  // The shader variants' name prefix when it is not the op's (several rows specializing one shader).
  std::string_view shader = {};
  TypeSet types = TypeSet::None;
  // The variants this row registers (bit i: variants[i]), where rows share one list with different
  // specialization constants; a variant outside it is not created.
  uint32_t variant_mask = ~0u;
  // Where the SPIR-V of its variants is embedded (nullptr: kernels/' own, vk::find_spirv).
  const vk::SpirvBlob* (*spirv)(std::string_view variant) = nullptr;
};

// The rows of every op file of kernels/ops (from their KVTRIE_REGISTER_OPS lines), in file order.
std::span<const OpRegistration* const> registered_ops();

// Lists an op file's rows: KVTRIE_REGISTER_OPS(rms_norm, &kRmsNorm); with the file's name without .cpp.
// Write it at namespace scope in kvtrie::kernels, at the start of a line (the build finds it there).
#define KVTRIE_REGISTER_OPS(file, ...)                              \
  std::span<const OpRegistration* const> registered_ops_##file() {  \
    static constexpr const OpRegistration* kRows[] = {__VA_ARGS__}; \
    return kRows;                                                   \
  }                                                                 \
  static_assert(true, "a semicolon follows")
// The generated list of those functions (cmake/op_list.cmake), one per op file.
using OpFileRows = std::span<const OpRegistration* const> (*)();
std::span<const OpFileRows> op_files();

// The types of a set, in the manifest's order.
std::span<const TensorType> types_of(TypeSet set);
// A row's variant indices: variant v (of `variants`, 0 when none) of type position t (in types_of) is
// v * types_of(types).size() + t.
uint32_t variant_count(const OpRegistration& row);
// The index of `type`'s build of variant v of a typed row; throws kvtrie::Error when the row's set lacks it.
uint32_t typed_variant(const OpRegistration& row, TensorType type, uint32_t variant = 0);
// Whether the row registers variant index i (variant_mask).
bool registers(const OpRegistration& row, uint32_t index);
// The shader variant of index i ("matvec_q8_norm_q4_k") and its weight type (typed rows only).
std::string shader_variant(const OpRegistration& row, uint32_t index);
std::optional<TensorType> variant_type(const OpRegistration& row, uint32_t index);

// The shader variant suffix of a tensor type ("q4_k"), shared with the matrix ops.
const char* type_variant(TensorType type);

// Specialization constants shared by several ops. Elementwise: 128 invocations per group (capped by the
// device), one value each.
vk::SpecConstants spec_elementwise(const vk::Device& device);
// Row reductions: a power-of-two work group; a shared-memory tree, so any subgroup size works.
vk::SpecConstants spec_row_reduce(const vk::Device& device);
// The largest power of two up to `size` that the device allows as a one-dimensional work group.
uint32_t workgroup_up_to(const vk::Device& device, uint32_t size);
// None: shaders with fixed sizes.
vk::SpecConstants spec_none(const vk::Device& device);

}  // namespace kvtrie::kernels
