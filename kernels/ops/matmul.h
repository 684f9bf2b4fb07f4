// Contract: matmul, the matrix-matrix product of prefill: Y[t][r] = dot(W[r, :], X[t, :]) for many tokens
// and every weight type (arguments as for matvec, kernels/ops/matvec.h). Three paths:
//   Deterministic: dispatches matvec (8 tokens per work group); bit-identical to matvec for every token
//                  whatever the batch, the --deterministic contract. Re-reads W once per 8 tokens.
//   Tiled:         portable 64x64 shared-memory tiles, f32; each output is reduced in k order by one thread,
//                  so it is batch-invariant among Tiled calls but not equal to matvec bit for bit.
//   CoopMat:       tensor cores through VK_KHR_cooperative_matrix or VK_NV_cooperative_matrix (f16
//                  inputs, f32 accumulate), only where the device has one; tiles of CoopmatTile (default 128
//                  rows x 128 tokens, 8 subgroups). Reads x as f16 from MatmulArgs::x_f16 where it is given
//                  and coopmat_takes_f16_x (the same f16 values as its own conversion of x).
//   CoopMat2:      the same products through VK_NV_cooperative_matrix2's workgroup-scope matrices (the driver
//                  stages and pipelines the tiles; Cm2Tile), for the 16-byte aligned weight formats
//                  (coopmat2_takes), reading x as f16 from MatmulArgs::x_f16 (convert_f16): the same f16
//                  values as CoopMat, so the same tolerance.
// Split-K: given MatmulArgs::split_scratch, a CoopMat product on the 32-token tile (batched decode: too few
// tiles to fill the device, each walking a whole row) splits k among more work groups (coopmat_k_splits),
// each storing a partial tile into the scratch, and a reduce_splits pass sums them in split order into y.
// dispatch_matmul_coopmat splits any tile so.
// Auto picks matvec for up to 16 tokens, CoopMat above that where the device has it (a 32-token tile up to
// 32 tokens), CoopMat2 instead for the large products where it is faster (coopmat2_wanted) when the caller
// gives x_f16, else matvec up to 32 tokens and Tiled above.
// Records into a CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <cstdint>

#include "kernels/ops/matvec.h"

namespace kvtrie::kernels {

enum class MatmulPath { Auto, Deterministic, Tiled, CoopMat, CoopMat2 };

// True when the device can run the CoopMat path (VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix
// with 16x16x16 f16 products, f16 arithmetic, subgroups of 32, 48 KiB of shared memory).
bool coopmat_supported(const vk::Device& device);
// Whether the CoopMat path is the VK_KHR_cooperative_matrix build (preferred where the device has it).
bool coopmat_uses_khr(const vk::Device& device);
// Tensor cores through VK_KHR_cooperative_matrix: coopmat_supported and coopmat_uses_khr (the KHR builds).
bool coopmat_khr_path(const vk::Device& device);

// Whether the CoopMat2 path runs on this device (VK_NV_cooperative_matrix2 enabled, shaders built) for
// weights of this type (Q4_0x8, Q8_0x8, Q6_Kx8, Q4_K, Q5_K).
bool coopmat2_takes(const vk::Device& device, TensorType type);
// Whether the CoopMat path reads this product's x as f16 from args.x_f16 when the caller gives it (the
// VK_KHR_cooperative_matrix build's large tile: more than 32 tokens, k and x_stride multiples of 8): half
// the bytes of x for every work group to read, and no conversion in the tile.
bool coopmat_takes_f16_x(const vk::Device& device, const MatmulArgs& args);
// Whether `requested` would run this product on CoopMat2 if args.x_f16 held x as f16: a caller that can
// convert x (convert_f16) asks this first. Auto wants it above 32 tokens for products of at least
// kCoopmat2MinWeights weights (the feed-forward products of 8B-class models: on an H100, sweep-matmul
// measured them faster than CoopMat, the smaller ones not), weights bound 16-byte aligned.
bool coopmat2_wanted(const vk::Device& device, MatmulPath requested, const MatmulArgs& args);
inline constexpr uint64_t kCoopmat2MinWeights = uint64_t{14336} * 4096;

// The path `requested` resolves to on this device for this product (throws kvtrie::Error when CoopMat or
// CoopMat2 is requested where it cannot run). CoopMat needs x_stride % 4 == 0; CoopMat2 needs x_f16.
MatmulPath resolve_matmul_path(const vk::Device& device, MatmulPath requested, const MatmulArgs& args);

void matmul(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
            MatmulPath path = MatmulPath::Auto);

// The cooperative-matrix tile: sg_m x sg_n subgroups of 32, each tm x tn blocks of 16x16 outputs, k steps
// of bk values through `buffers` shared buffers (2: alternating; 1: refilled after a second barrier). Its
// specialization constants are {sg_m, sg_n, tm, tn, threads, bk, buffers} (matmul_coopmat.comp).
struct CoopmatTile {
  uint32_t sg_m = 4, sg_n = 2, tm = 2, tn = 4;
  uint32_t bk = 32, buffers = 2;
  vk::SpecConstants spec() const { return {sg_m, sg_n, tm, tn, threads(), bk, buffers}; }
  // matmul_coopmat.comp's shared memory: the W and X slices (f16, rows padded by 8) and a 16x16 f32 block
  // per subgroup for edge tiles.
  uint32_t shared_bytes() const { return buffers * (rows() + tokens()) * (bk + 8) * 2 + sg_m * sg_n * 1024; }
  uint32_t rows() const { return sg_m * 16 * tm; }
  uint32_t tokens() const { return sg_n * 16 * tn; }
  uint32_t threads() const { return sg_m * sg_n * 32; }
};
// The tile of products of up to 32 tokens (batched decode): 64 rows x 32 tokens, 4 subgroups.
inline constexpr CoopmatTile kSmallTile{4, 1, 1, 2};
// The tile of the build that reads x as f16 (coopmat_takes_f16_x): the default shape with k steps of 64 and
// one shared buffer.
inline constexpr CoopmatTile kF16XTile{4, 2, 2, 4, 64, 1};
// ... and its wide tile for large products (f16x_plan): 128 rows x 256 tokens, 16 subgroups of 32 x 64
// outputs. On an H100, prefill of 512 tokens of llama3-8b with 8 subgroups of 64 x 64 (2x4x4x4) instead of
// kF16XTile on Q/K/V and gate/up: Q4_0 8,578 -> 9,166 tok/s, Q4_K 8,019 -> 8,818, Q8_0 7,759 -> 8,718;
// unsplit on o and down (64 of its tiles) it was slower, split in two on down faster (sweep-matmul: Q4_0 417
// -> 337 us, Q8_0 456 -> 353). 16 subgroups of 32 x 64 against those 8 (sweep-matmul, session 16): gate/up
// Q4_K 378 -> 322 us, Q8_0 402 -> 347; down split in two 331 -> 298, 358 -> 317; Q4_K Q/K/V 192 -> 169.
inline constexpr CoopmatTile kF16XWideTile{4, 4, 2, 4, 32, 1};
// ... and its narrow tile, 128 rows x 64 tokens (4x2 subgroups of 32x32, k steps of 64), for products too
// small to make kWideTileMinGroups work groups of kF16XTile: twice as many groups. On an H100, llama3-1b
// prefill of 512 tokens with it on down (2,048 x 8,192: 64 tiles of kF16XTile) 44,048 -> 46,918 tok/s, on o
// +1%; on llama3-8b's o (128 tiles) it was 2% slower.
inline constexpr CoopmatTile kF16XNarrowTile{4, 2, 2, 2, 64, 1};
// Rows of 4096 values split too (llama3-8b's o, session 16: prefill of 512 tokens +1-2% for Q4_0, Q4_K,
// Q8_0).
inline constexpr uint32_t kWideTileMinGroups = 96, kWideSplitMinCols = 4096;
// How matmul() runs a product on the x-as-f16 build: kF16XWideTile where its tokens fill at least seven
// eighths of its token tiles and it makes kWideTileMinGroups work groups, or half that many with rows of
// at least kWideSplitMinCols values split in two (when args.split_scratch holds two planes and
// args.k_splits is not 1); else kF16XTile, unsplit, or kF16XNarrowTile where kF16XTile makes fewer than
// kWideTileMinGroups work groups.
struct F16XPlan {
  const CoopmatTile* tile;
  uint32_t k_splits;
};
F16XPlan f16x_plan(const MatmulArgs& args);

// The k splits the CoopMat path makes of this product with this tile: 1 without args.split_scratch or with
// args.k_splits 1; else args.k_splits, or (0) kAutoSplits for products of fewer than kSplitMaxGroups tiles,
// each split keeping at least kMinSplitSteps k steps; never more than the scratch holds. On an H200, 32
// sequences of llama3-8b decoding took 895 tok/s unsplit, 1,367 with splits for about 512 work groups a
// product and 1,425 with 8 splits of every product (12, 16 and 24: 1,378-1,401).
uint32_t coopmat_k_splits(const MatmulArgs& args, const CoopmatTile& tile);
inline constexpr uint32_t kAutoSplits = 8, kSplitMaxGroups = 1024, kMinSplitSteps = 8;
// Scratch floats a split-K product needs: a (tokens x rows) plane per split, each padded to 4 floats.
uint64_t split_scratch_floats(uint32_t tokens, uint32_t rows, uint32_t splits);

// Records the CoopMat product with a pipeline built for `tile` (the tuning harness; matmul() uses the
// default tile).
void dispatch_matmul_coopmat(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                             const vk::ComputePipeline& pipeline, const CoopmatTile& tile);

// The CoopMat2 tile: a work group of `threads` invocations computes rows x tokens outputs, k steps of bk
// (a divisor of 256). Its specialization constants are {threads, rows, tokens, bk} (matmul_cm2.comp).
struct Cm2Tile {
  uint32_t threads = 256, rows = 128, tokens = 128, bk = 32;
  vk::SpecConstants spec() const { return {threads, rows, tokens, bk}; }
};

// Records the CoopMat2 product with a pipeline of matmul_cm2_<type> built for `tile` (the tuning harness;
// matmul() uses the default tile).
void dispatch_matmul_cm2(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                         const vk::ComputePipeline& pipeline, const Cm2Tile& tile);

}  // namespace kvtrie::kernels
