// Contract: GpuWeights holds every weight tensor of one model in device-local Vulkan buffers, uploaded once
// from the GgufFile's mapping by upload_weights(). Tensors keep their GGUF row layout (kernels read the
// block formats directly). Owned by GpuModel; the Context must outlive it. Upload runs on the caller's
// thread and returns when every byte is on the device.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ops/matmul.h"
#include "kernels/tensor_type.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/context.h"
#include "runner/model/model_config.h"

namespace kvtrie::engine {

// A weight tensor resident in device-local memory (invalid buffer: the model has no such tensor).
struct DeviceTensor {
  vk::Buffer buffer;
  TensorType type = TensorType::F32;
  uint32_t rows = 0, cols = 0;
  vk::BufferView view() const { return buffer.view(0, uint64_t{rows} * row_bytes(type, cols)); }
  kernels::WeightMatrix matrix() const { return {view(), type, rows, cols}; }
};

struct DeviceLayer {
  DeviceTensor attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
};

struct GpuWeights {
  DeviceTensor token_embd, output_norm, output, rope_freqs;
  bool tied = false;  // logits use token_embd
  std::vector<DeviceLayer> layers;
  uint64_t bytes = 0;  // device memory taken
  const DeviceTensor& logits_matrix() const { return tied ? token_embd : output; }
};

GpuWeights upload_weights(vk::Context& context, const ModelWeights& weights, const ModelConfig& config);

}  // namespace kvtrie::engine
