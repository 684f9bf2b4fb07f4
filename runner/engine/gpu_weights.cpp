#include "runner/engine/gpu_weights.h"

#include "kernels/vk/staging.h"

namespace kvtrie::engine {

namespace {

DeviceTensor upload_tensor(vk::Context& context, const GgufTensor* tensor, uint64_t& bytes) {
  DeviceTensor out;
  if (!tensor) return out;
  out.type = tensor->type;
  out.cols = static_cast<uint32_t>(tensor->shape[0]);
  out.rows = static_cast<uint32_t>(tensor->rows());
  // Shaders read whole 32-bit words: round the allocation up (the tail is never used).
  out.buffer = vk::Buffer(context.device(), (tensor->data.size() + 15) / 16 * 16, vk::MemoryKind::DeviceLocal);
  vk::upload(context, out.buffer, 0, std::as_bytes(tensor->data));
  bytes += out.buffer.size();
  return out;
}

}  // namespace

GpuWeights upload_weights(vk::Context& context, const ModelWeights& w, const ModelConfig& config) {
  GpuWeights g;
  auto up = [&](const GgufTensor* t) { return upload_tensor(context, t, g.bytes); };
  g.token_embd = up(w.token_embd);
  g.output_norm = up(w.output_norm);
  g.tied = config.tied_output || w.output == w.token_embd;
  if (!g.tied) g.output = up(w.output);
  g.rope_freqs = up(w.rope_freqs);
  for (const LayerWeights& lw : w.layers) {
    DeviceLayer& d = g.layers.emplace_back();
    d.attn_norm = up(lw.attn_norm);
    d.wq = up(lw.wq);
    d.wk = up(lw.wk);
    d.wv = up(lw.wv);
    d.wo = up(lw.wo);
    d.bq = up(lw.bq);
    d.bk = up(lw.bk);
    d.bv = up(lw.bv);
    d.q_norm = up(lw.q_norm);
    d.k_norm = up(lw.k_norm);
    d.ffn_norm = up(lw.ffn_norm);
    d.w_gate = up(lw.w_gate);
    d.w_up = up(lw.w_up);
    d.w_down = up(lw.w_down);
  }
  return g;
}

}  // namespace kvtrie::engine
