#include "kernels/ops/matmul.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/op_util.h"
#include "kernels/vk/context.h"

namespace kvtrie::kernels {

namespace {
constexpr uint32_t kTile = 64;  // BM = BN in matmul.comp
// Up to this many tokens matvec (weights read once per 8 tokens) is as fast as the 64-token tiles on an
// H200 (kvtrie-bench kernel, docs/BENCHMARKS.md: 122 vs 120 us for 32 tokens of a 4096x4096 Q4_0 matrix);
// with cooperative matrices, their 32-token tile takes over above kCoopmatMinTokens (on an H100, sweep-matmul
// put a llama3-8b layer's four products at 32 tokens at 1.37 ms with it, where the engine's 32-sequence step
// spent about 2.1 ms a layer; at 8 tokens the tile was slower).
constexpr uint32_t kMatvecTokens = 32;
constexpr uint32_t kCoopmatMinTokens = 16;
}  // namespace

bool coopmat_uses_khr(const vk::Device& device) {
  return device.khr_coopmat_enabled() && device.khr_coopmat_supports({.m = 16, .n = 16, .k = 16});
}

bool coopmat_supported(const vk::Device& device) {
  // matmul_coopmat.comp assumes subgroups of 32 and 16x16x16 f16 matrices (what every
  // VK_NV_cooperative_matrix implementation offers; checked for KHR), and 48 KiB of shared memory for the
  // default tile.
  return (device.coopmat_enabled() || coopmat_uses_khr(device)) && device.has_float16() &&
         device.subgroup_size() == 32 && device.info().max_shared_memory >= 48 * 1024;
}

bool coopmat_khr_path(const vk::Device& device) {
  return coopmat_supported(device) && coopmat_uses_khr(device);
}

bool coopmat2_takes(const vk::Device& device, TensorType type) {
  // The tiled types; enabled only where the shaders were built.
  return tensor_type_info(type).tiled && device.nv_coopmat2_enabled();
}

namespace {
// matmul_cm2.comp addresses weights in whole groups from the binding's start: with a storage-offset
// alignment of at most 16 and 16-byte aligned weights (every group and row of these formats is a multiple
// of 16 bytes), every row chunk's binding starts exactly at its weights.
bool coopmat2_binding_aligned(const vk::Device& device, const MatmulArgs& args) {
  return device.info().min_storage_buffer_offset_alignment <= 16 && args.w.data.offset % 16 == 0;
}
// What CoopMat2 needs of the device, the weights and x (an explicit request or the harness's dispatch).
void check_coopmat2(const vk::Device& device, const MatmulArgs& args) {
  KVTRIE_CHECK(coopmat2_takes(device, args.w.type) && coopmat2_binding_aligned(device, args),
               "matmul: VK_NV_cooperative_matrix2 is not available on this device for these weights");
  KVTRIE_CHECK(!args.x_f16.empty(), "matmul: the CoopMat2 path reads x as f16 (MatmulArgs::x_f16)");
}
}  // namespace

namespace {
// Which build of the cooperative-matrix matmul a device runs (NV or KHR).
bool nv_coopmat_path(const vk::Device& d) {
  return coopmat_supported(d) && !coopmat_uses_khr(d);
}
bool coopmat2_path(const vk::Device& d) {
  return d.nv_coopmat2_enabled();
}
// Matrix tiles have a fixed size: the spec constants are the tile's.
template <const auto& Tile>
vk::SpecConstants spec_of_tile(const vk::Device&) {
  return Tile.spec();
}
constexpr CoopmatTile kDefaultTile{};
constexpr Cm2Tile kCm2Tile{};

// Every row has one variant per weight type. matmul_coopmat.comp's builds: NV and KHR with the default and
// the 32-token tile, x as f16 (X_F16) with its three tiles; `shader`: the build whose variants a row
// specializes with another tile.
constexpr OpRegistration coopmat_row(std::string_view op, vk::SpecConstants (*spec)(const vk::Device&),
                                     bool (*available)(const vk::Device&), std::string_view shader = {}) {
  return {.op = op, .spec = spec, .available = available, .shader = shader, .types = TypeSet::All};
}
constexpr OpRegistration kMatmul{.op = "matmul", .spec = spec_none, .types = TypeSet::All};
constexpr OpRegistration kCoopmat =
    coopmat_row("matmul_coopmat", spec_of_tile<kDefaultTile>, nv_coopmat_path);
constexpr OpRegistration kCoopmatKhr =
    coopmat_row("matmul_coopmat_khr", spec_of_tile<kDefaultTile>, coopmat_khr_path);
constexpr OpRegistration kCoopmatKhrXh =
    coopmat_row("matmul_coopmat_khr_xh", spec_of_tile<kF16XTile>, coopmat_khr_path);
constexpr OpRegistration kCoopmatKhrXhWide = coopmat_row(
    "matmul_coopmat_khr_xh_wide", spec_of_tile<kF16XWideTile>, coopmat_khr_path, "matmul_coopmat_khr_xh");
constexpr OpRegistration kCoopmatKhrXhNarrow = coopmat_row(
    "matmul_coopmat_khr_xh_narrow", spec_of_tile<kF16XNarrowTile>, coopmat_khr_path, "matmul_coopmat_khr_xh");
constexpr OpRegistration kCoopmatT32 =
    coopmat_row("matmul_coopmat_t32", spec_of_tile<kSmallTile>, nv_coopmat_path, "matmul_coopmat");
constexpr OpRegistration kCoopmatKhrT32 =
    coopmat_row("matmul_coopmat_khr_t32", spec_of_tile<kSmallTile>, coopmat_khr_path, "matmul_coopmat_khr");
// The VK_NV_cooperative_matrix2 build, for the tiled types.
constexpr OpRegistration kCm2{
    .op = "matmul_cm2", .spec = spec_of_tile<kCm2Tile>, .available = coopmat2_path, .types = TypeSet::Tiled};
// The sum of split-K partials.
constexpr std::string_view kF32[] = {"f32"};
constexpr OpRegistration kReduceSplits{.op = "reduce_splits", .variants = kF32, .spec = spec_elementwise};
}  // namespace

bool coopmat_takes_f16_x(const vk::Device& device, const MatmulArgs& args) {
  const uint32_t x_stride = args.x_stride ? args.x_stride : args.w.cols;
  return coopmat_khr_path(device) && args.tokens > kSmallTile.tokens() && args.w.cols % 8 == 0 &&
         x_stride % 8 == 0;
}

F16XPlan f16x_plan(const MatmulArgs& args) {
  const CoopmatTile& wide = kF16XWideTile;
  const uint32_t token_tiles = div_up(args.tokens, wide.tokens());
  const uint64_t groups = uint64_t{div_up(args.w.rows, wide.rows())} * token_tiles;
  if (uint64_t{args.tokens} * 8 >= uint64_t{token_tiles} * wide.tokens() * 7) {  // whole token tiles
    if (groups >= kWideTileMinGroups) return {&wide, 1};
    if (groups * 2 >= kWideTileMinGroups && args.w.cols >= kWideSplitMinCols && args.k_splits != 1 &&
        args.split_scratch.range / 4 >= split_scratch_floats(args.tokens, args.w.rows, 2))
      return {&wide, 2};
  }
  const uint64_t square =
      uint64_t{div_up(args.w.rows, kF16XTile.rows())} * div_up(args.tokens, kF16XTile.tokens());
  return {square < kWideTileMinGroups ? &kF16XNarrowTile : &kF16XTile, 1};
}

bool coopmat2_wanted(const vk::Device& device, MatmulPath requested, const MatmulArgs& args) {
  if (requested == MatmulPath::CoopMat2) return true;
  const uint32_t x_stride = args.x_stride ? args.x_stride : args.w.cols;
  return requested == MatmulPath::Auto && args.tokens > kSmallTile.tokens() && coopmat_supported(device) &&
         x_stride % 4 == 0 && coopmat2_takes(device, args.w.type) && coopmat2_binding_aligned(device, args) &&
         uint64_t{args.w.rows} * args.w.cols >= kCoopmat2MinWeights;
}

MatmulPath resolve_matmul_path(const vk::Device& device, MatmulPath requested, const MatmulArgs& args) {
  switch (requested) {
    case MatmulPath::Deterministic:
    case MatmulPath::Tiled:
      return requested;
    case MatmulPath::CoopMat:
      KVTRIE_CHECK(coopmat_supported(device),
                   "matmul: cooperative matrices are not available on this device");
      return requested;
    case MatmulPath::CoopMat2:
      check_coopmat2(device, args);
      return requested;
    case MatmulPath::Auto:
      break;
  }
  const uint32_t x_stride = args.x_stride ? args.x_stride : args.w.cols;
  const bool coopmat = coopmat_supported(device) && x_stride % 4 == 0;
  if (args.tokens <= kMatvecTokens && !(coopmat && args.tokens > kCoopmatMinTokens))
    return MatmulPath::Deterministic;
  if (!args.x_f16.empty() && coopmat2_wanted(device, requested, args)) return MatmulPath::CoopMat2;
  return coopmat ? MatmulPath::CoopMat : MatmulPath::Tiled;
}

void matmul(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args, MatmulPath path) {
  switch (resolve_matmul_path(k.device(), path, args)) {
    case MatmulPath::Deterministic:
      if (path == MatmulPath::Auto && args.tokens == 1)
        matvec_single_token(rec, k, args);  // decode without the batch-invariance promise
      else
        matvec(rec, k, args);
      return;
    case MatmulPath::CoopMat: {
      // Few tokens (batched decode, short chunks) take the 32-token tile: twice the row tiles in flight.
      const bool few = args.tokens <= kSmallTile.tokens();
      const bool khr = coopmat_uses_khr(k.device());
      // Split-K for the 32-token tile, and for the wide tile of long rows (f16x_plan): prefill's other
      // large tiles come in enough numbers, and on an H200 splitting llama3-8b's 512-token products with
      // the 128 x 128 tile (the reduce pass included) was 1% slower.
      MatmulArgs a = args;
      if (!few) a.split_scratch = {};
      if (!a.x_f16.empty() && coopmat_takes_f16_x(k.device(), a)) {
        MatmulArgs f16 = args;
        f16.x = args.x_f16;
        if (args.f16x_tile != nullptr) {  // tuning: the caller's tile, unsplit
          const CoopmatTile& tile = *args.f16x_tile;
          KVTRIE_CHECK(tile.shared_bytes() <= k.device().info().max_shared_memory,
                       "matmul: the tile needs more shared memory than the device has");
          f16.split_scratch = {};
          const std::string shader = shader_variant(kCoopmatKhrXh, typed_variant(kCoopmatKhrXh, args.w.type));
          dispatch_matmul_coopmat(rec, k, f16, k.context().pipelines().get(shader, tile.spec()), tile);
          return;
        }
        const F16XPlan plan = f16x_plan(args);
        f16.k_splits = plan.k_splits;
        if (plan.k_splits == 1) f16.split_scratch = {};
        const OpRegistration& op = plan.tile == &kF16XWideTile     ? kCoopmatKhrXhWide
                                   : plan.tile == &kF16XNarrowTile ? kCoopmatKhrXhNarrow
                                                                   : kCoopmatKhrXh;
        dispatch_matmul_coopmat(rec, k, f16, k.pipeline(op, args.w.type), *plan.tile);
        return;
      }
      const OpRegistration& op = khr ? (few ? kCoopmatKhrT32 : kCoopmatKhr) : (few ? kCoopmatT32 : kCoopmat);
      dispatch_matmul_coopmat(rec, k, a, k.pipeline(op, args.w.type), few ? kSmallTile : CoopmatTile{});
      return;
    }
    case MatmulPath::CoopMat2:
      dispatch_matmul_cm2(rec, k, args, k.pipeline(kCm2, args.w.type), Cm2Tile{});
      return;
    case MatmulPath::Tiled:
    case MatmulPath::Auto:
      break;
  }
  dispatch_matmul_variant(rec, k, args, k.pipeline(kMatmul, args.w.type), kTile, kTile);
}

uint64_t split_scratch_floats(uint32_t tokens, uint32_t rows, uint32_t splits) {
  return (uint64_t{tokens} * rows + 3) / 4 * 4 * splits;
}

uint32_t coopmat_k_splits(const MatmulArgs& args, const CoopmatTile& tile) {
  if (args.split_scratch.empty() || args.k_splits == 1 || args.tokens == 0 || args.w.rows == 0) return 1;
  const uint32_t steps = div_up(args.w.cols, tile.bk);
  const uint64_t groups = uint64_t{div_up(args.w.rows, tile.rows())} * div_up(args.tokens, tile.tokens());
  uint32_t splits = args.k_splits;
  if (splits == 0)
    splits = groups >= kSplitMaxGroups ? 1 : std::min(kAutoSplits, std::max(1u, steps / kMinSplitSteps));
  splits = std::min(splits, steps);
  const uint64_t fit = args.split_scratch.range / 4 / split_scratch_floats(args.tokens, args.w.rows, 1);
  splits = static_cast<uint32_t>(std::min<uint64_t>(splits, fit));
  if (splits <= 1) return 1;
  return div_up(steps, div_up(steps, splits));  // whole k steps per split, none empty
}

void dispatch_matmul_coopmat(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                             const vk::ComputePipeline& pipeline, const CoopmatTile& tile) {
  const WeightMatrix& w = args.w;
  const uint32_t x_stride = args.x_stride ? args.x_stride : w.cols;
  const uint32_t y_stride = args.y_stride ? args.y_stride : w.rows;
  KVTRIE_CHECK(x_stride % 4 == 0, "matmul_coopmat: x_stride must be a multiple of 4 floats");
  KVTRIE_CHECK(tile.shared_bytes() <= k.device().info().max_shared_memory,
               "matmul_coopmat: the tile needs more shared memory than the device gives a work group");
  KVTRIE_CHECK(w.cols % tensor_type_info(w.type).block_elements == 0,
               "matmul: row length is not whole blocks");
  if (w.rows == 0 || args.tokens == 0) return;
  const uint64_t rb = row_bytes(w.type, w.cols);
  KVTRIE_CHECK(w.data.range >= rb * w.rows, "matmul: weight view is smaller than the matrix");
  const uint32_t splits = coopmat_k_splits(args, tile);
  const uint32_t steps = div_up(w.cols, tile.bk);
  const uint32_t split_steps = div_up(steps, splits);
  // Split: each split's tile goes to its plane of the scratch (tokens x rows, stride rows), then one sum.
  const uint32_t plane = static_cast<uint32_t>(split_scratch_floats(args.tokens, w.rows, 1));
  const vk::BufferView out = splits > 1 ? args.split_scratch : args.y;
  const uint32_t gz = div_up(args.tokens, tile.tokens()) * splits;
  KVTRIE_CHECK(gz <= 65535, "matmul: too many tokens for one dispatch");
  const vk::PhysicalDeviceInfo& dev = k.device().info();
  for (const RowChunk& chunk :
       split_rows(w, dev.max_storage_buffer_range, dev.min_storage_buffer_offset_alignment)) {
    const AlignedBinding wb = align_binding(k.device(), w.data.sub(chunk.first_row * rb, chunk.rows * rb));
    const struct {
      MatmulPush base;
      uint32_t split_steps, split_stride;
    } push{{chunk.rows, w.cols, args.tokens, static_cast<uint32_t>(rb), x_stride,
            splits > 1 ? w.rows : y_stride, chunk.first_row, wb.byte_offset},
           split_steps,
           plane};
    const Grid grid = grid_1d(div_up(chunk.rows, tile.rows()));
    rec.dispatch(pipeline, {vk::read(wb.view), vk::read(args.x), vk::write(out)}, push, grid.x, grid.y, gz);
  }
  if (splits == 1) return;
  const struct {
    uint32_t rows, ntok, splits, plane, y_stride;
  } sum{w.rows, args.tokens, splits, plane, y_stride};
  const Grid grid = grid_1d(div_up(uint64_t{w.rows} * args.tokens, k.workgroup_size(kReduceSplits)));
  rec.dispatch(k.pipeline(kReduceSplits), {vk::read(args.split_scratch), vk::write(args.y)}, sum, grid.x,
               grid.y);
}

void dispatch_matmul_cm2(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                         const vk::ComputePipeline& pipeline, const Cm2Tile& tile) {
  check_coopmat2(k.device(), args);
  // Whole blocks per row are checked by dispatch_matmul_variant.
  KVTRIE_CHECK(256 % tile.bk == 0, "matmul_cm2: k steps must divide the 256-value blocks");
  MatmulArgs f16 = args;
  f16.x = args.x_f16;
  dispatch_matmul_variant(rec, k, f16, pipeline, tile.rows, tile.tokens);
}

KVTRIE_REGISTER_OPS(matmul, &kMatmul, &kCoopmat, &kCoopmatKhr, &kCoopmatKhrXh, &kCoopmatKhrXhWide,
                    &kCoopmatKhrXhNarrow, &kCoopmatT32, &kCoopmatKhrT32, &kCm2, &kReduceSplits);

}  // namespace kvtrie::kernels
