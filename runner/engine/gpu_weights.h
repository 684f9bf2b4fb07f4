// Contract: GpuWeights holds every weight tensor of one model in device-local Vulkan memory, uploaded once
// from the GgufFile's mapping by upload_weights(). Rows keep their GGUF size; Q4_0, Q8_0 and Q6_K matrices
// are converted on the device to their device formats (kernels/ops/weight_format.h), and DeviceTensor::type
// says which layout a tensor has. Tensors are packed into a few large buffers (GpuWeights::blocks, at most
// kWeightBlockBytes each unless one tensor is larger), each at an offset aligned for a shader binding; a
// DeviceTensor is a view into its block. A layer's Q, K and V matrices, and its gate and up matrices, are
// placed back to back when they share type and row length, so each set is also one matrix (wqkv,
// w_gate_up) that one product reads. The blocks are allocated on a helper thread while the
// upload copies into those already there. Owned by GpuModel; the Context must outlive it.
// upload_weights() runs on the caller's thread and returns when every byte is on the device and the
// pipelines the Context's PipelineCache was creating in the background (Kernels' prewarm, overlapped with
// the upload) exist: the model is ready to run. It logs the load's phases (one info line).
#pragma once
#include <cstdint>
#include <vector>

#include "base/tensor_type.h"
#include "kernels/ops/matmul.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/context.h"
#include "runner/model/model_config.h"

namespace kvtrie::engine {

// Largest weight block allocation (a tensor larger than this gets a block of its own).
inline constexpr uint64_t kWeightBlockBytes = 1ull << 30;

// A tensor's byte range inside its block (non-owning; empty when the model has no such tensor).
struct WeightRange {
  vk::BufferView range;
  bool valid() const { return !range.empty(); }
  vk::BufferView view() const { return range; }
  vk::BufferView view(uint64_t offset, uint64_t size) const { return range.sub(offset, size); }
};

// A weight tensor resident in device-local memory (invalid buffer: the model has no such tensor).
struct DeviceTensor {
  WeightRange buffer;
  TensorType type = TensorType::F32;
  uint32_t rows = 0, cols = 0;
  vk::BufferView view() const { return buffer.view(0, uint64_t{rows} * row_bytes(type, cols)); }
  kernels::WeightMatrix matrix() const { return {view(), type, rows, cols}; }
};

struct DeviceLayer {
  DeviceTensor attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
  DeviceTensor wqkv;       // [wq; wk; wv] as one matrix, or invalid when they cannot be joined
  DeviceTensor w_gate_up;  // [w_gate; w_up] as one matrix, or invalid
};

// What the weights' upload took (pipelines are in PipelineCache::stats()), for the engine's load log line.
struct WeightsLoadReport {
  uint64_t weight_bytes = 0;
  uint32_t weight_tensors = 0;
  uint32_t weight_blocks = 0;   // device allocations holding them
  double weights_ms = 0;        // allocation + upload, waiting for background pipelines excluded
  double upload_copy_ms = 0;    // of which copying into staging slots (host)
  double upload_wait_ms = 0;    // and waiting for slots' GPU copies
  double pipeline_wait_ms = 0;  // how long the load waited for pipelines after the upload
};

struct GpuWeights {
  std::vector<vk::Buffer> blocks;  // own the memory every DeviceTensor views
  DeviceTensor token_embd, output_norm, output, rope_freqs;
  bool tied = false;  // logits use token_embd
  std::vector<DeviceLayer> layers;
  uint64_t bytes = 0;  // device memory taken
  WeightsLoadReport load;
  const DeviceTensor& logits_matrix() const { return tied ? token_embd : output; }
};

// Throws kvtrie::Error when device memory runs out (nothing is leaked). `block_bytes`: the block size limit
// (tests use small ones).
GpuWeights upload_weights(vk::Context& context, const ModelWeights& weights, const ModelConfig& config,
                          uint64_t block_bytes = kWeightBlockBytes);

// The distinct types the model's weight tensors have on the device (device formats where they apply), for
// kernels::Kernels' prewarm of what the model needs.
std::vector<TensorType> weight_types(const ModelWeights& weights);

}  // namespace kvtrie::engine
