#include "kernels/ops/matmul.h"

#include <algorithm>

#include "kernels/error.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"

namespace kvtrie::ops {

namespace {
constexpr uint32_t kTile = 64;  // BM = BN in matmul.comp and matmul_coopmat.comp
constexpr uint32_t kMatvecTokens = 8;
}  // namespace

bool coopmat_supported(const vk::Context& context) {
  const vk::Device& device = context.device();
  // matmul_coopmat.comp assumes 4 subgroups of 32 in its 128-thread group and 16x16x16 f16 matrices
  // (what every VK_NV_cooperative_matrix implementation offers).
  return device.info().nv_cooperative_matrix && device.has_float16() && device.subgroup_size() == 32;
}

MatmulPath resolve_matmul_path(const vk::Context& context, MatmulPath requested, uint32_t tokens) {
  switch (requested) {
    case MatmulPath::Deterministic:
    case MatmulPath::Tiled:
      return requested;
    case MatmulPath::CoopMat:
      KVTRIE_CHECK(coopmat_supported(context), "matmul: cooperative matrices are not available on this device");
      return requested;
    case MatmulPath::Auto:
      break;
  }
  if (tokens <= kMatvecTokens) return MatmulPath::Deterministic;
  return coopmat_supported(context) ? MatmulPath::CoopMat : MatmulPath::Tiled;
}

void matmul(vk::CommandRecorder& recorder, const MatmulArgs& args, MatmulPath path) {
  vk::Context& ctx = recorder.context();
  const MatmulPath resolved = resolve_matmul_path(ctx, path, args.tokens);
  if (resolved == MatmulPath::Deterministic) {
    matvec(recorder, args);
    return;
  }
  const WeightMatrix& w = args.w;
  KVTRIE_CHECK(w.cols % tensor_type_info(w.type).block_elements == 0, "matmul: row length is not whole blocks");
  if (w.rows == 0 || args.tokens == 0) return;
  const auto& dev = ctx.device().info();
  const std::string variant =
      (resolved == MatmulPath::CoopMat ? "matmul_coopmat_" : "matmul_") + type_variant_suffix(w.type);
  const vk::ComputePipeline& pipeline = ctx.pipelines().get(variant);
  const uint64_t rb = row_bytes(w.type, w.cols);
  const uint32_t x_stride = args.x_stride ? args.x_stride : w.cols;
  const uint32_t y_stride = args.y_stride ? args.y_stride : w.rows;
  KVTRIE_CHECK(w.data.range >= rb * w.rows, "matmul: weight view is smaller than the matrix");
  const uint32_t gy = (args.tokens + kTile - 1) / kTile;
  KVTRIE_CHECK(gy <= 65535, "matmul: too many tokens for one dispatch");
  for (const RowChunk& chunk : split_rows(w, dev.max_storage_buffer_range, dev.min_storage_buffer_offset_alignment)) {
    const MatmulPush push{chunk.rows, w.cols, args.tokens, static_cast<uint32_t>(rb), x_stride, y_stride,
                          chunk.first_row};
    recorder.dispatch(pipeline,
                      {vk::read(w.data.sub(chunk.first_row * rb, chunk.rows * rb)), vk::read(args.x),
                       vk::write(args.y)},
                      push, (chunk.rows + kTile - 1) / kTile, gy);
  }
}

}  // namespace kvtrie::ops
