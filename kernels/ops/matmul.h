// Contract: matmul, the matrix-matrix product of prefill: Y[t][r] = dot(W[r, :], X[t, :]) for many tokens
// and every weight type (arguments as for matvec, kernels/ops/matvec.h). Three paths:
//   Deterministic: dispatches matvec (8 tokens per work group); bit-identical to matvec for every token
//                  whatever the batch, the --deterministic contract. Re-reads W once per 8 tokens.
//   Tiled:         portable 64x64 shared-memory tiles, f32; each output is reduced in k order by one thread,
//                  so it is batch-invariant among Tiled calls but not equal to matvec bit for bit.
//   CoopMat:       tensor cores through VK_KHR_cooperative_matrix or VK_NV_cooperative_matrix (f16 inputs, f32
//                  accumulate), only where the device has one; tiles of CoopmatTile (default 128 rows x 128
//                  tokens, 8 subgroups).
// Auto picks matvec for up to 32 tokens (as fast as 64-token tiles there, docs/BENCHMARKS.md), above that
// CoopMat where the device has it, else Tiled.
// Records into a CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <cstdint>

#include "kernels/ops/matvec.h"

namespace kvtrie::kernels {

enum class MatmulPath { Auto, Deterministic, Tiled, CoopMat };

// True when the device can run the CoopMat path (VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix
// with 16x16x16 f16 products, f16 arithmetic, subgroups of 32, 48 KiB of shared memory).
bool coopmat_supported(const vk::Device& device);
// Whether the CoopMat path is the VK_KHR_cooperative_matrix build (preferred where the device has it).
bool coopmat_uses_khr(const vk::Device& device);

// The path `requested` resolves to on this device for `tokens` tokens of x_stride floats apart (throws
// kvtrie::Error when CoopMat is requested on a device without it). CoopMat needs x_stride % 4 == 0.
MatmulPath resolve_matmul_path(const vk::Device& device, MatmulPath requested, uint32_t tokens, uint32_t x_stride);

void matmul(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args, MatmulPath path = MatmulPath::Auto);

// The cooperative-matrix tile: sg_m x sg_n subgroups of 32, each tm x tn blocks of 16x16 outputs. Its
// specialization constants are {sg_m, sg_n, tm, tn, threads} (matmul_coopmat.comp).
struct CoopmatTile {
  uint32_t sg_m = 4, sg_n = 2, tm = 2, tn = 4;
  uint32_t rows() const { return sg_m * 16 * tm; }
  uint32_t tokens() const { return sg_n * 16 * tn; }
  uint32_t threads() const { return sg_m * sg_n * 32; }
};
// Records the CoopMat product with a pipeline built for `tile` (the tuning harness; matmul() uses the
// default tile).
void dispatch_matmul_coopmat(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                             const vk::ComputePipeline& pipeline, const CoopmatTile& tile);

}  // namespace kvtrie::kernels
