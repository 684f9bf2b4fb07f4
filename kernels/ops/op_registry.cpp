// The single registration table of compute ops: one row per op, its variants as data, and how its
// specialization constants follow from the device. Adding an op = its .comp, its variants.cmake lines,
// its dispatch function and one row here.
#include <algorithm>
#include <array>
#include <deque>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops/attention.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/matmul.h"
#include "kernels/ops/matvec.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/vk/device.h"

namespace kvtrie::kernels {
namespace {

using namespace std::string_view_literals;

// Elementwise ops: 128 invocations per group (capped by the device), one value each.
vk::SpecConstants spec_elementwise(const vk::Device& d) {
  return {std::min(128u, d.info().max_workgroup_size_x)};
}
// Row reductions: a power-of-two work group; a shared-memory tree, so any subgroup size works.
vk::SpecConstants spec_row_reduce(const vk::Device& d) {
  uint32_t size = 256;
  while (size > d.info().max_workgroup_size_x || size > d.info().max_workgroup_invocations) size /= 2;
  return {size};
}

// Matrix ops: matvec's and attention's reduction order follows the work-group size, fixed per
// device; matmul tiles have a fixed size.
vk::SpecConstants spec_matvec(const vk::Device& d) {
  return {matvec_workgroup_size(d)};
}
vk::SpecConstants spec_attention(const vk::Device& d) {
  return {attention_workgroup_size(d)};
}
// matvec_q8: {work-group size, rows per lane, tokens per work group, subgroups per work group}.
// (matvec_q8_shape() picks a build's rows per lane; threads per row are a push constant.)
vk::SpecConstants spec_matvec_q8(const vk::Device& d, uint32_t rows_per_lane, uint32_t tokens) {
  const uint32_t wg = matvec_workgroup_size(d);
  return {wg, rows_per_lane, tokens, wg / std::max(d.subgroup_size(), 1u)};
}
// The decode step's residual product with its output normed for the next product (acc_qnorm): 16 lanes of
// one row, so that a work group makes a group of 16 outputs at the speed of one row a lane (matvec_q8.h).
vk::SpecConstants spec_matvec_q8_lanes16(const vk::Device& d) {
  const MatvecQ8Shape s = matvec_q8_residual_out_shape(d);
  return {s.workgroup, s.rows_per_lane, 1, s.workgroup / std::max(d.subgroup_size(), 1u)};
}
// One registered build: rows per lane and tokens per work group.
template <uint32_t Rows, uint32_t Tokens>
vk::SpecConstants spec_matvec_q8_build(const vk::Device& d) {
  return spec_matvec_q8(d, Rows, Tokens);
}
// quantize_q8: one work group a token, as wide as the device allows up to 512 threads (its shared reduction
// holds 64 subgroups), so that the decode step's single token is quantized in few rounds of loads.
vk::SpecConstants spec_quantize_q8(const vk::Device& d) {
  const uint32_t sg = std::max(d.subgroup_size(), 1u);
  return {std::min({512u, 64 * sg, d.info().max_workgroup_size_x, d.info().max_workgroup_invocations})};
}
// Which build of matvec_q8 and of the cooperative-matrix matmul a device runs (one of each).
bool matvec_q8_int_dot(const vk::Device& d) {
  return matvec_q8_uses_int_dot(d);
}
bool matvec_q8_portable(const vk::Device& d) {
  return !matvec_q8_uses_int_dot(d);
}
bool nv_coopmat_path(const vk::Device& d) {
  return coopmat_supported(d) && !coopmat_uses_khr(d);
}
bool khr_coopmat_path(const vk::Device& d) {
  return coopmat_supported(d) && coopmat_uses_khr(d);
}
vk::SpecConstants spec_coopmat(const vk::Device&) {
  return CoopmatTile{}.spec();
}
vk::SpecConstants spec_coopmat_f16_x(const vk::Device&) {
  return kF16XTile.spec();
}
vk::SpecConstants spec_coopmat_f16_x_wide(const vk::Device&) {
  return kF16XWideTile.spec();
}
vk::SpecConstants spec_coopmat_f16_x_narrow(const vk::Device&) {
  return kF16XNarrowTile.spec();
}
vk::SpecConstants spec_coopmat_small(const vk::Device&) {
  return kSmallTile.spec();
}
bool coopmat2_path(const vk::Device& d) {
  return d.nv_coopmat2_enabled();
}
vk::SpecConstants spec_cm2(const vk::Device&) {
  return Cm2Tile{}.spec();
}
vk::SpecConstants spec_none(const vk::Device&) {
  return {};
}

constexpr std::array kF32 = {"f32"sv};
constexpr std::array kF16 = {"f16"sv};
constexpr std::array kU32 = {"u32"sv};
constexpr std::array kConvert = {"f32_f16"sv};
constexpr std::array kRmsNorm = {"f32"sv, "add_f32"sv, "f32_f16"sv, "add_f32_f16"sv};  // _f16: f16 out
constexpr std::array kSwiglu = {"f32"sv, "f32_f16"sv};
constexpr std::array kKvWrite = {"f16"sv, "rope_f16"sv, "rope_qkv_f16"sv};
constexpr std::array kAttention = {"paged"sv, "combine"sv, "combine_qout"sv, "combine_f16"sv};
constexpr std::array kAttentionProbes = {"probe1"sv, "probe2"sv, "probe3"sv, "probe4"sv, "probe5"sv};
constexpr std::array kAttentionCoopmat = {"d64"sv, "d128"sv};  // head_dim
// The variant names of the manifest's types (base/tensor_types.def) that Pick keeps, in its order.
template <bool (*Pick)(const TensorTypeInfo&)>
constexpr auto type_variants() {
  constexpr size_t n = std::count_if(std::begin(kAllTensorTypes), std::end(kAllTensorTypes), Pick);
  std::array<std::string_view, n> names{};
  size_t i = 0;
  for (const TensorTypeInfo& t : kAllTensorTypes)
    if (Pick(t)) names[i++] = t.variant;
  return names;
}
constexpr bool every_type(const TensorTypeInfo&) {
  return true;
}
constexpr bool tiled_type(const TensorTypeInfo& t) {
  return t.tiled;
}
constexpr bool device_format(const TensorTypeInfo& t) {
  return t.file_type != t.type;
}
constexpr auto kAllTypes = type_variants<every_type>();
constexpr auto kTiledTypes = type_variants<tiled_type>();  // the tensor-core matmul's and matvec_q8's
constexpr auto kDeviceFormatTypes = type_variants<device_format>();
// matvec_q8 builds: <mode>_<type> (matvec_q8.h) for the given folds, every format it takes. The names live
// as long as the process (the registry keeps views of them).
std::vector<std::string_view> matvec_q8_builds(std::initializer_list<const char*> modes) {
  static std::deque<std::string> names;  // only filled during static initialization (kOps)
  std::vector<std::string_view> views;
  for (const char* mode : modes)
    for (std::string_view type : kTiledTypes)
      views.push_back(names.emplace_back(std::string(mode) + "_" + std::string(type)));
  return views;
}
// Every fold (the single-token builds and the batched build of 4 rows a lane, which quantized_out needs);
// the batched SwiGLU product without it (1 row a lane); the batched other products (2 rows a lane).
std::span<const std::string_view> matvec_q8_variants() {
  static const std::vector<std::string_view> views =
      matvec_q8_builds({"store", "norm", "acc", "acc_qnorm", "norm_swiglu", "norm_swiglu_qout", "norm_qkv"});
  return views;
}
std::span<const std::string_view> matvec_q8_residual_out_variants() {
  static const std::vector<std::string_view> views = matvec_q8_builds({"acc_qnorm"});
  return views;
}
std::span<const std::string_view> matvec_q8_swiglu_variants() {
  static const std::vector<std::string_view> views = matvec_q8_builds({"norm_swiglu"});
  return views;
}
std::span<const std::string_view> matvec_q8_pair_variants() {
  static const std::vector<std::string_view> views = matvec_q8_builds({"store", "norm", "acc", "norm_qkv"});
  return views;
}
constexpr std::array kQuantizeQ8 = {"f32"sv, "norm_f32"sv};

const OpRegistration kOps[] = {
    {"fill", kF32, spec_elementwise},
    {"rms_norm", kRmsNorm, spec_row_reduce},
    {"rope", kF32, spec_elementwise},
    {"swiglu", kSwiglu, spec_elementwise},
    {"convert", kConvert, spec_elementwise},
    {"add", kF32, spec_elementwise},
    {"reduce_splits", kF32, spec_elementwise},
    {"add_bias", kF32, spec_elementwise},
    {"read_probe", kU32, spec_elementwise, nullptr, {}, false, true},
    {"grid_sync_probe", kU32, spec_elementwise, nullptr, {}, false, true},
    {"get_rows", kAllTypes, spec_elementwise},
    {"kv_write", kKvWrite, spec_elementwise},
    {"matvec", kAllTypes, spec_matvec},
    {"matvec1", kAllTypes, spec_matvec},         // the single-token build of matvec.comp
    {"matvec1_swiglu", kAllTypes, spec_matvec},  // ... whose x is silu(gate) * up
    {"matmul", kAllTypes, spec_none},
    {"matmul_coopmat", kAllTypes, spec_coopmat, nv_coopmat_path},
    {"matmul_coopmat_khr", kAllTypes, spec_coopmat, khr_coopmat_path},
    {"matmul_coopmat_khr_xh", kAllTypes, spec_coopmat_f16_x, khr_coopmat_path},  // x as f16 (X_F16)
    {"matmul_coopmat_khr_xh_wide", kAllTypes, spec_coopmat_f16_x_wide, khr_coopmat_path,
     "matmul_coopmat_khr_xh"},  // ... its wide tile
    {"matmul_coopmat_khr_xh_narrow", kAllTypes, spec_coopmat_f16_x_narrow, khr_coopmat_path,
     "matmul_coopmat_khr_xh"},  // ... and its narrow one
    {"matmul_coopmat_t32", kAllTypes, spec_coopmat_small, nv_coopmat_path, "matmul_coopmat"},
    {"matmul_coopmat_khr_t32", kAllTypes, spec_coopmat_small, khr_coopmat_path, "matmul_coopmat_khr"},
    {"matmul_cm2", kTiledTypes, spec_cm2, coopmat2_path, {}, true},
    {"attention", kAttention, spec_attention},
    {"attention_probe", kAttentionProbes, spec_attention, nullptr, "attention", false,
     true},  // attention.comp's
    {"attention_coopmat", kAttentionCoopmat, spec_none, khr_coopmat_path},
    {"repack", kDeviceFormatTypes, spec_none},
    {"matvec_q8_t1", matvec_q8_variants(), spec_matvec_q8_build<kMatvecQ8Rows, 1>, matvec_q8_portable,
     "matvec_q8", true},
    {"matvec_q8_t1r1", matvec_q8_variants(), spec_matvec_q8_build<kMatvecQ8RowsOne, 1>, matvec_q8_portable,
     "matvec_q8", true},
    {"matvec_q8_t1l16", matvec_q8_residual_out_variants(), spec_matvec_q8_lanes16, matvec_q8_portable,
     "matvec_q8", true},
    {"matvec_q8_t8", matvec_q8_variants(), spec_matvec_q8_build<kMatvecQ8Rows, 8>, matvec_q8_portable,
     "matvec_q8", true},
    {"matvec_q8_t4r1", matvec_q8_swiglu_variants(), spec_matvec_q8_build<kMatvecQ8RowsOne, 4>,
     matvec_q8_portable, "matvec_q8", true},
    {"matvec_q8_t4r2", matvec_q8_pair_variants(), spec_matvec_q8_build<kMatvecQ8RowsPair, 4>,
     matvec_q8_portable, "matvec_q8", true},
    {"matvec_q8_t8r1", matvec_q8_swiglu_variants(), spec_matvec_q8_build<kMatvecQ8RowsOne, 8>,
     matvec_q8_portable, "matvec_q8", true},
    {"matvec_q8_t8r2", matvec_q8_pair_variants(), spec_matvec_q8_build<kMatvecQ8RowsPair, 8>,
     matvec_q8_portable, "matvec_q8", true},
    {"matvec_q8i_t1", matvec_q8_variants(), spec_matvec_q8_build<kMatvecQ8Rows, 1>, matvec_q8_int_dot,
     "matvec_q8i", true},
    {"matvec_q8i_t1r1", matvec_q8_variants(), spec_matvec_q8_build<kMatvecQ8RowsOne, 1>, matvec_q8_int_dot,
     "matvec_q8i", true},
    {"matvec_q8i_t1l16", matvec_q8_residual_out_variants(), spec_matvec_q8_lanes16, matvec_q8_int_dot,
     "matvec_q8i", true},
    {"matvec_q8i_t8", matvec_q8_variants(), spec_matvec_q8_build<kMatvecQ8Rows, 8>, matvec_q8_int_dot,
     "matvec_q8i", true},
    {"matvec_q8i_t4r1", matvec_q8_swiglu_variants(), spec_matvec_q8_build<kMatvecQ8RowsOne, 4>,
     matvec_q8_int_dot, "matvec_q8i", true},
    {"matvec_q8i_t4r2", matvec_q8_pair_variants(), spec_matvec_q8_build<kMatvecQ8RowsPair, 4>,
     matvec_q8_int_dot, "matvec_q8i", true},
    {"matvec_q8i_t8r1", matvec_q8_swiglu_variants(), spec_matvec_q8_build<kMatvecQ8RowsOne, 8>,
     matvec_q8_int_dot, "matvec_q8i", true},
    {"matvec_q8i_t8r2", matvec_q8_pair_variants(), spec_matvec_q8_build<kMatvecQ8RowsPair, 8>,
     matvec_q8_int_dot, "matvec_q8i", true},
    {"quantize_q8", kQuantizeQ8, spec_quantize_q8},
};

}  // namespace

std::span<const OpRegistration> registered_ops() {
  return kOps;
}

}  // namespace kvtrie::kernels
