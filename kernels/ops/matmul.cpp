#include "kernels/ops/matmul.h"

#include "kernels/error.h"
#include "kernels/ops/ops.h"

namespace kvtrie::kernels {

namespace {
constexpr uint32_t kTile = 64;  // BM = BN in matmul.comp
// Up to this many tokens matvec (weights read once per 8 tokens) is as fast as the 64-token tiles on an
// H200 (kvtrie-bench kernel, docs/BENCHMARKS.md: 122 vs 120 us for 32 tokens of a 4096x4096 Q4_0 matrix).
constexpr uint32_t kMatvecTokens = 32;
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

MatmulPath resolve_matmul_path(const vk::Device& device, MatmulPath requested, uint32_t tokens, uint32_t x_stride) {
  switch (requested) {
    case MatmulPath::Deterministic:
    case MatmulPath::Tiled:
      return requested;
    case MatmulPath::CoopMat:
      KVTRIE_CHECK(coopmat_supported(device), "matmul: cooperative matrices are not available on this device");
      return requested;
    case MatmulPath::Auto:
      break;
  }
  if (tokens <= kMatvecTokens) return MatmulPath::Deterministic;
  return coopmat_supported(device) && x_stride % 4 == 0 ? MatmulPath::CoopMat : MatmulPath::Tiled;
}

void matmul(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args, MatmulPath path) {
  switch (resolve_matmul_path(k.device(), path, args.tokens, args.x_stride ? args.x_stride : args.w.cols)) {
    case MatmulPath::Deterministic:
      if (path == MatmulPath::Auto && args.tokens == 1)
        matvec_single_token(rec, k, args);  // decode without the batch-invariance promise
      else
        matvec(rec, k, args);
      return;
    case MatmulPath::CoopMat:
      dispatch_matmul_coopmat(rec, k, args, k.pipeline("matmul_coopmat", type_variant(args.w.type)),
                              CoopmatTile{});
      return;
    case MatmulPath::Tiled:
    case MatmulPath::Auto:
      break;
  }
  dispatch_matmul_variant(rec, k, args, k.pipeline("matmul", type_variant(args.w.type)), kTile, kTile);
}

void dispatch_matmul_coopmat(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                             const vk::ComputePipeline& pipeline, const CoopmatTile& tile) {
  const uint32_t x_stride = args.x_stride ? args.x_stride : args.w.cols;
  KVTRIE_CHECK(x_stride % 4 == 0, "matmul_coopmat: x_stride must be a multiple of 4 floats");
  dispatch_matmul_variant(rec, k, args, pipeline, tile.rows(), tile.tokens());
}

}  // namespace kvtrie::kernels
