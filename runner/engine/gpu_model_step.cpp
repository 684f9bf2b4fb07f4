// What a GpuModel step records (GpuModel::Impl, gpu_model_impl.h): the layers, their products (matvec_q8,
// the fused float products, the tensor-core tiles), norms, rope, attention and the logits.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "base/error.h"
#include "kernels/ops/add.h"
#include "kernels/ops/add_bias.h"
#include "kernels/ops/argmax_rows.h"
#include "kernels/ops/convert.h"
#include "kernels/ops/get_rows.h"
#include "kernels/ops/kv_write.h"
#include "kernels/ops/l2_prefetch.h"
#include "kernels/ops/matvec.h"
#include "kernels/ops/swiglu.h"
#include "kernels/ops/top_k_rows.h"
#include "kernels/vk/device.h"
#include "runner/engine/gpu_model_impl.h"

namespace kvtrie::engine {

kernels::MatmulArgs GpuModel::Impl::product(const DeviceTensor& w, const vk::Buffer& in,
                                            const vk::Buffer& out, uint32_t tokens, GpuProduct which) const {
  kernels::MatmulArgs a{w.matrix(), in.view(), out.view(), tokens};
  if (split_scratch.valid()) a.split_scratch = split_scratch.view();
  a.k_splits = options.k_splits;
  if (const std::optional<kernels::CoopmatTile>& tile = options.f16x_tiles[which]) a.f16x_tile = &*tile;
  return a;
}

void GpuModel::Impl::matmul(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out,
                            uint32_t tokens, GpuProduct which, bool converted) {
  kernels::MatmulArgs a = product(w, in, out, tokens, which);
  kernels::matmul(*rec, kernels, a, give_f16_x(a, converted));
}

std::optional<kernels::MatmulPath> GpuModel::Impl::f16_x_path(const kernels::MatmulArgs& a) const {
  const vk::Device& dev = kernels.device();
  if (options.coopmat2 && kernels::coopmat2_wanted(dev, path, a)) return path;
  if (options.f16_x && path == kernels::MatmulPath::Auto &&
      kernels::resolve_matmul_path(dev, path, a) == kernels::MatmulPath::CoopMat &&
      kernels::coopmat_takes_f16_x(dev, a))
    return kernels::MatmulPath::CoopMat;  // explicitly: x_f16 must not turn Auto into CoopMat2
  return std::nullopt;
}

kernels::MatmulPath GpuModel::Impl::give_f16_x(kernels::MatmulArgs& a, bool& converted) {
  const std::optional<kernels::MatmulPath> f16 = f16_x_path(a);
  if (!f16) return path;
  const uint32_t count = a.tokens * (a.x_stride ? a.x_stride : a.w.cols);
  a.x_f16 = x_f16.view(0, uint64_t{count} * 2);
  if (!converted) kernels::convert_f16(*rec, kernels, a.x, a.x_f16, count);
  converted = true;
  return *f16;
}

kernels::RmsNormArgs GpuModel::Impl::norm_args(const vk::Buffer& x_in, const DeviceTensor& weight,
                                               const vk::Buffer& out, uint32_t rows) const {
  kernels::RmsNormArgs a;
  a.x = x_in.view();
  a.weight = weight.view();
  a.y = out.view();
  a.rows = rows;
  a.n = config.n_embd;
  a.eps = config.rms_eps;
  return a;
}

void GpuModel::Impl::rms_norm(const vk::Buffer& x_in, const DeviceTensor& weight, const vk::Buffer& out,
                              uint32_t rows, bool half_out) {
  kernels::RmsNormArgs a = norm_args(x_in, weight, out, rows);
  a.half_out = half_out;
  kernels::rms_norm(*rec, kernels, a);
}

void GpuModel::Impl::add_rms_norm(const vk::Buffer& x_inout, const vk::Buffer& residual,
                                  const DeviceTensor& weight, const vk::Buffer& out, uint32_t rows,
                                  bool half_out) {
  kernels::RmsNormArgs a = norm_args(x_inout, weight, out, rows);
  a.half_out = half_out;
  kernels::add_rms_norm(*rec, kernels, a, residual.view());
}

void GpuModel::Impl::head_norm(vk::BufferView buf, const DeviceTensor& weight, uint32_t tokens,
                               uint32_t heads) {
  kernels::RmsNormArgs a;
  a.x = a.y = buf;
  a.weight = weight.view();
  a.rows = tokens * heads;
  a.n = config.head_dim_k;
  a.eps = config.rms_eps;
  a.heads = heads;
  a.x_stride = a.y_stride = qkv_stride;
  kernels::rms_norm(*rec, kernels, a);
}

kernels::RopeArgs GpuModel::Impl::rope_args(vk::BufferView buf, uint32_t tokens, uint32_t heads) const {
  kernels::RopeArgs a;
  a.x = buf;
  a.token_stride = qkv_stride;
  a.positions = step_io().positions.view();
  if (weights.rope_freqs.buffer.valid()) a.freq_factors = weights.rope_freqs.view();
  a.n_tokens = tokens;
  a.n_heads = heads;
  a.head_dim = config.head_dim_k;
  a.rope_dims = config.rope_dims ? config.rope_dims : config.head_dim_k;
  a.freq_base = config.rope_freq_base;
  a.mode = config.rope_type == RopeType::Neox ? kernels::RopeMode::Neox : kernels::RopeMode::Normal;
  return a;
}

void GpuModel::Impl::rope(vk::BufferView buf, uint32_t tokens, uint32_t heads) {
  kernels::rope(*rec, kernels, rope_args(buf, tokens, heads));
}

void GpuModel::Impl::embed(const vk::Buffer& index, const DeviceTensor& table, const vk::Buffer& out,
                           uint32_t tokens, const DeviceTensor* norm) {
  const auto chunks = kernels::split_rows(table.matrix(), context.device().max_storage_buffer_range(),
                                          context.device().info().min_storage_buffer_offset_alignment);
  for (const kernels::RowChunk& c : chunks) {
    kernels::GetRowsArgs a;
    a.table = table.buffer.view(uint64_t{c.first_row} * row_bytes(table.type, table.cols),
                                uint64_t{c.rows} * row_bytes(table.type, table.cols));
    a.type = table.type;
    a.n = table.cols;
    a.row_begin = c.first_row;
    a.row_count = c.rows;
    a.ids = index.view();
    a.out = out.view();
    a.n_tokens = tokens;
    if (norm != nullptr) {
      a.quantized_out = normed_q();
      a.norm_weight = norm->view();
    }
    kernels::get_rows(*rec, kernels, a);
  }
  xq_norm = norm;
}

bool GpuModel::Impl::q8(const DeviceTensor& w, uint32_t T) const {
  const uint32_t most = !kernels::coopmat_supported(context.device()) ? kQ8TokensNoCoopmat
                        : options.q8_max_tokens                       ? options.q8_max_tokens
                                                                      : kQ8Tokens;
  return (options.deterministic || T <= most) && kernels::matvec_q8_supported(w.type, w.cols);
}

kernels::MatvecQ8Args GpuModel::Impl::q8_args(const DeviceTensor& w, const kernels::QuantizedX& in,
                                              vk::BufferView out, uint32_t T, uint32_t y_stride) const {
  kernels::MatvecQ8Args a;
  a.product = {w.matrix(), {}, out, T, 0, y_stride};
  a.x = in;
  a.norm_eps = config.rms_eps;
  return a;
}

kernels::QuantizedX GpuModel::Impl::quantize_input(const vk::Buffer& in, uint32_t cols,
                                                   const DeviceTensor* norm, uint32_t T) {
  if (&in == &x && norm != nullptr && norm == xq_norm) return normed_q();  // the product before wrote it
  kernels::QuantizeQ8Args a;
  a.x = in.view();
  a.tokens = T;
  a.cols = cols;
  if (norm != nullptr) a.norm_weight = norm->view();
  a.out = norm != nullptr ? normed_q() : hidden_q();
  if (norm != nullptr) xq_norm = nullptr;
  kernels::quantize_q8(*rec, kernels, a);
  return a.out;
}

void GpuModel::Impl::settle_residual(uint32_t T) {
  if (pending_residual) {
    kernels::add(*rec, kernels, x.view(), tmp.view(), x.view(), T * config.n_embd);
    xq_norm = nullptr;
  }
  pending_residual = false;
}

void GpuModel::Impl::norm_into_xn(const DeviceTensor& weight, uint32_t T, bool half) {
  const vk::Buffer& out = half ? x_f16 : xn;
  if (pending_residual) {
    add_rms_norm(x, tmp, weight, out, T, half);
    xq_norm = nullptr;
  } else {
    rms_norm(x, weight, out, T, half);
  }
  pending_residual = false;
}

void GpuModel::Impl::normed_products(GpuProduct which, const DeviceTensor& norm,
                                     std::initializer_list<std::pair<const DeviceTensor*, uint32_t>> parts,
                                     const vk::Buffer& out, uint32_t out_stride, uint32_t T,
                                     const kernels::QkvToPages* to_pages) {
  bool fold = true;
  for (const auto& [w, col] : parts) fold = fold && q8(*w, T);
  if (fold) {
    settle_residual(T);
    const kernels::QuantizedX quantized = quantize_input(x, config.n_embd, &norm, T);
    for (const auto& [w, col] : parts) {
      kernels::MatvecQ8Args a =
          q8_args(*w, quantized, out.view(uint64_t{col} * 4, out.size() - uint64_t{col} * 4), T, out_stride);
      a.norm = true;
      if (to_pages != nullptr) a.qkv_pages = *to_pages;
      kernels::matvec_q8(*rec, kernels, a);
    }
    return;
  }
  bool fold_float = true;
  for (const auto& [w, col] : parts) fold_float = fold_float && fused(*w, T);
  if (fold_float) {
    settle_residual(T);
    for (const auto& [w, col] : parts)
      fused_normed_product(*w, norm, out.view(uint64_t{col} * 4, out.size() - uint64_t{col} * 4), T,
                           out_stride);
    return;
  }
  // Where every product reads x as f16, the norm writes only that; else xn, converted once if needed.
  bool converted = true;
  for (const auto& [w, col] : parts) converted = converted && takes_f16_x(product(*w, xn, out, T, which));
  norm_into_xn(norm, T, converted);
  for (const auto& [w, col] : parts) {
    kernels::MatmulArgs a = product(*w, xn, out, T, which);
    a.y = out.view(uint64_t{col} * 4, out.size() - uint64_t{col} * 4);
    a.y_stride = out_stride;
    kernels::matmul(*rec, kernels, a, give_f16_x(a, converted));
  }
}

void GpuModel::Impl::residual_product(GpuProduct which, const DeviceTensor& w, const vk::Buffer& in,
                                      uint32_t T, const std::optional<kernels::QuantizedX>& quantized,
                                      const DeviceTensor* next_norm, bool converted) {
  xq_norm = nullptr;
  if (q8(w, T)) {
    kernels::MatvecQ8Args a =
        q8_args(w, quantized ? *quantized : quantize_input(in, w.cols, nullptr, T), x.view(), T);
    a.accumulate = true;
    if (T == 1 && next_norm != nullptr && w.rows % 16 == 0) {
      a.quantized_out = normed_q();
      a.out_norm = next_norm->view();
      xq_norm = next_norm;
    }
    kernels::matvec_q8(*rec, kernels, a);
    return;
  }
  settle_residual(T);
  if (fused(w, T)) {
    kernels::FusedMatvecArgs a;
    a.w = w.matrix();
    a.x = in.view();
    a.y = x.view();
    a.accumulate = true;
    a.tokens = T;
    kernels::matvec_fused(*rec, kernels, a);
    return;
  }
  matmul(w, in, tmp, T, which, converted);
  pending_residual = true;
}

bool GpuModel::Impl::fused(const DeviceTensor& w, uint32_t T) const {
  return (T == 1 || options.deterministic) && kernels::matvec_fused_supported(context.device(), w.matrix());
}

void GpuModel::Impl::fused_normed_product(const DeviceTensor& w, const DeviceTensor& norm, vk::BufferView out,
                                          uint32_t T, uint32_t out_stride, bool swiglu,
                                          const vk::Buffer* in) {
  kernels::FusedMatvecArgs a;
  a.w = w.matrix();
  a.x = (in != nullptr ? *in : x).view();
  a.y = out;
  a.norm = norm.view();
  a.eps = config.rms_eps;
  a.swiglu = swiglu;
  a.tokens = T;
  a.y_stride = out_stride;
  if (T > 1) {  // a batch's normed x and sums of squares (matvec_fused); xn holds max_batch_tokens rows
    a.normed_x = xn.view();
    a.norm_sums = norm_sums.view();
  }
  kernels::matvec_fused(*rec, kernels, a);
}

bool GpuModel::Impl::half_out_for(const DeviceTensor& w, const vk::Buffer& in, uint32_t T,
                                  GpuProduct which) const {
  return !q8(w, T) && takes_f16_x(product(w, in, tmp, T, which));
}

const DeviceTensor* GpuModel::Impl::ffn_norm_if_q8(const DeviceLayer& w, uint32_t T) const {
  const DeviceTensor& first = w.w_gate_up.buffer.valid() ? w.w_gate_up : w.w_gate;
  return q8(first, T) && (w.w_gate_up.buffer.valid() || q8(w.w_up, T)) ? &w.ffn_norm : nullptr;
}

const DeviceTensor* GpuModel::Impl::norm_after_layer_if_q8(uint32_t l, uint32_t T) const {
  if (l + 1 == config.n_layers) {
    const DeviceTensor& out = weights.logits_matrix();
    return T == 1 && q8(out, 1) ? &weights.output_norm : nullptr;
  }
  return attn_norm_if_q8(l + 1, T);
}

const DeviceTensor* GpuModel::Impl::attn_norm_if_q8(uint32_t l, uint32_t T) const {
  const DeviceLayer& n = weights.layers[l];
  const bool joined = n.wqkv.buffer.valid();
  const bool all_q8 = joined ? q8(n.wqkv, T) : q8(n.wq, T) && q8(n.wk, T) && q8(n.wv, T);
  return all_q8 ? &n.attn_norm : nullptr;
}

void GpuModel::Impl::store_kv(const DeviceLayer& w, uint32_t l, uint32_t T, vk::BufferView q,
                              vk::BufferView k, vk::BufferView v, const kernels::RopeArgs& k_rope,
                              const kernels::RopeArgs& q_rope) {
  const uint32_t q_dim = config.n_heads * config.head_dim_k;
  const uint32_t kv_dim = layout.kv_dim;
  if (config.has_qkv_bias) {
    kernels::add_bias(*rec, kernels, q, w.bq.view(), T, q_dim, qkv_stride);
    kernels::add_bias(*rec, kernels, k, w.bk.view(), T, kv_dim, qkv_stride);
    kernels::add_bias(*rec, kernels, v, w.bv.view(), T, kv_dim, qkv_stride);
  }
  if (config.has_qk_norm) {
    head_norm(q, w.q_norm, T, config.n_heads);
    head_norm(k, w.k_norm, T, config.n_kv_heads);
  }
  // Normal-mode rope rotates K on its way into the pages and Q in place in the same dispatch (two
  // dispatches and a barrier level fewer).
  const bool fused_rope = k_rope.mode == kernels::RopeMode::Normal;
  if (!fused_rope) {
    rope(q, T, config.n_heads);
    rope(k, T, config.n_kv_heads);
  }
  for (const PageChunk& chunk : kv_chunks) {
    kernels::KvWriteArgs kw;
    kw.k = k;
    kw.v = v;
    kw.k_stride = kw.v_stride = qkv_stride;
    kw.slots = step_io().slots.view();
    kw.pages = chunk.view;
    kw.layout = layout;
    kw.layer = l;
    kw.n_tokens = T;
    kw.page_begin = chunk.page_begin;
    kw.page_count = chunk.page_count;
    if (fused_rope)
      kernels::kv_write_rope(*rec, kernels, kw, k_rope, &chunk == &kv_chunks.front() ? &q_rope : nullptr);
    else
      kernels::kv_write(*rec, kernels, kw);
  }
}

void GpuModel::Impl::attention_block(const DeviceLayer& w, uint32_t l, uint32_t T, uint32_t max_position) {
  const uint32_t q_dim = config.n_heads * config.head_dim_k;
  const uint32_t kv_dim = layout.kv_dim;
  const vk::BufferView q = qkv.view(), k = qkv.view(uint64_t{k_col} * 4, qkv.size() - uint64_t{k_col} * 4),
                       v = qkv.view(uint64_t{v_col} * 4, qkv.size() - uint64_t{v_col} * 4);
  const kernels::RopeArgs k_rope = rope_args(k, T, config.n_kv_heads);
  const kernels::RopeArgs q_rope = rope_args(q, T, config.n_heads);
  // Q, K and V of the normed residual stream: one product where the matrices are joined and K, V sit
  // right after Q in qkv. On matvec_q8 that product also rotates Q and stores K and V in the pages, where
  // nothing else comes between it and normal-mode rope (a dispatch and a barrier level fewer).
  const bool joined = w.wqkv.buffer.valid() && k_col == q_dim && v_col == q_dim + kv_dim;
  std::optional<kernels::QkvToPages> to_pages;
  if (joined && q8(w.wqkv, T) && k_rope.mode == kernels::RopeMode::Normal && !config.has_qkv_bias &&
      !config.has_qk_norm) {
    to_pages.emplace();
    to_pages->q_rows = q_dim;
    to_pages->rope = k_rope;
    to_pages->slots = step_io().slots.view();
    for (size_t c = 0; c < kv_chunks.size(); ++c) to_pages->pools[c] = kv_chunks[c].view;
    to_pages->pages_per_binding = kv_chunks.size() > 1 ? kv_chunks[0].page_count : 0;
    to_pages->layout = layout;
    to_pages->layer = l;
  }
  if (joined)
    normed_products(kProductQkv, w.attn_norm, {{&w.wqkv, 0}}, qkv, qkv_stride, T,
                    to_pages ? &*to_pages : nullptr);
  else
    normed_products(kProductQkv, w.attn_norm, {{&w.wq, 0}, {&w.wk, k_col}, {&w.wv, v_col}}, qkv, qkv_stride,
                    T);
  if (!to_pages) store_kv(w, l, T, q, k, v, k_rope, q_rope);
  kernels::AttentionArgs at;
  at.q = q;
  at.q_stride = qkv_stride;
  at.kv_pages = kv_chunks[0].view;
  if (kv_chunks.size() > 1) {
    at.pages_per_binding = kv_chunks[0].page_count;
    for (size_t c = 1; c < kv_chunks.size(); ++c) at.kv_pages_more[c - 1] = kv_chunks[c].view;
  }
  at.page_table = step_io().page_table.view();
  at.token_info = step_io().token_info.view();
  at.scratch = attn_scratch.view();
  at.out = attn.view();
  at.tokens = T;
  at.n_heads = config.n_heads;
  at.n_kv_heads = config.n_kv_heads;
  at.head_dim = config.head_dim_k;
  at.layout = layout;
  at.layer = l;
  at.max_position = max_position;
  at.split_size = split_size(T, max_position, decode_step);
  // Prefill blocks take the tensor cores where the device has them, decode steps attention_decode (neither
  // is batch-invariant against attention.comp); --deterministic every batch attention_decode with each
  // token's own splits where it can (position_splits).
  at.tensor_cores = !options.deterministic && T > kSmallBatch;
  at.decode = decode_step || position_splits;
  at.decode_key_lanes = options.attention_key_lanes;
  if (at.decode) at.split_counters = split_counters.view();
  // The o projection's input quantized by attention's combine pass (no dispatch of its own).
  if (q8(w.wo, T) && config.head_dim_k % 16 == 0) at.quantized_out = hidden_q();
  // ... or as f16 where the o projection reads it so.
  at.half_out = half_out_for(w.wo, attn, T, kProductO);
  if (at.half_out) at.out = x_f16.view();
  attention_in_blocks(at);
  // Beside the latency-bound decode pass (no barrier between them), the next products' weights into L2.
  if (const L2PrefetchPlan plan = l2_prefetch_plan(w, T); at.decode && plan.any())
    l2_prefetch_after_attention(w, plan);
  residual_product(kProductO, w.wo, attn, T, at.quantized_out, ffn_norm_if_q8(w, T), at.half_out);
}

L2PrefetchPlan auto_l2_prefetch(TensorType o, TensorType gate_up, uint64_t gate_up_bytes) {
  if (o != gate_up) return {};
  if (o == TensorType::Q4_0x8 && gate_up_bytes >= (32ull << 20))
    return {.o = true, .ffn_mib = 16, .groups = 512};
  if (o == TensorType::Q8_0x8 && gate_up_bytes >= (64ull << 20))
    return {.o = true, .ffn_mib = 0, .groups = 512};
  return {};
}

L2PrefetchPlan GpuModel::Impl::l2_prefetch_plan(const DeviceLayer& w, uint32_t T) const {
  switch (options.l2_prefetch) {
    case L2Prefetch::Off:
      return {};
    case L2Prefetch::Custom:
      return options.prefetch_plan;
    case L2Prefetch::Auto:
      break;
  }
  if (T != 1) return {};
  if (w.w_gate_up.buffer.valid())
    return auto_l2_prefetch(w.wo.type, w.w_gate_up.type, w.w_gate_up.view().range);
  if (w.w_gate.type != w.w_up.type) return {};
  return auto_l2_prefetch(w.wo.type, w.w_gate.type, w.w_gate.view().range + w.w_up.view().range);
}

void GpuModel::Impl::l2_prefetch_after_attention(const DeviceLayer& w, const L2PrefetchPlan& plan) {
  std::array<vk::BufferView, 3> ranges;
  if (plan.o) ranges[0] = w.wo.view();
  // The first rows of gate and of up: the product's first work groups read those. A range starts where a
  // binding may (256 bytes covers every device's alignment), up to 255 bytes past the rows' start.
  const uint64_t half = uint64_t{plan.ffn_mib} << 19;
  const auto head = [&](const DeviceTensor& m, uint64_t offset, uint64_t bytes) -> vk::BufferView {
    const uint64_t skip = (256 - (m.view().offset + offset) % 256) % 256;
    if (skip >= bytes) return {};
    return m.view().sub(offset + skip, std::min(half, bytes - skip) / 16 * 16);
  };
  if (half > 0 && w.w_gate_up.buffer.valid()) {
    const uint64_t gate_bytes = w.w_gate_up.view().range / 2;
    ranges[1] = head(w.w_gate_up, 0, gate_bytes);
    ranges[2] = head(w.w_gate_up, gate_bytes, gate_bytes);
  } else if (half > 0) {
    ranges[1] = head(w.w_gate, 0, w.w_gate.view().range);
    ranges[2] = head(w.w_up, 0, w.w_up.view().range);
  }
  kernels::l2_prefetch(*rec, kernels, ranges, prefetch_sink.view(), plan.groups);
}

void GpuModel::Impl::attention_in_blocks(const kernels::AttentionArgs& a) {
  const uint32_t block = std::min(a.tokens, deterministic_attention_tokens());
  const uint32_t q_row = a.q_stride ? a.q_stride : a.n_heads * a.head_dim;
  const uint32_t out_row = a.out_stride ? a.out_stride : a.n_heads * a.head_dim;
  const uint64_t out_bytes = a.half_out ? 2 : 4;
  for (uint32_t t0 = 0; t0 < a.tokens; t0 += block) {
    kernels::AttentionArgs b = a;
    b.tokens = std::min(block, a.tokens - t0);
    if (t0 > 0) {
      const auto tail = [](vk::BufferView v, uint64_t offset) { return v.sub(offset, v.range - offset); };
      b.q = tail(a.q, uint64_t{t0} * q_row * 4);
      b.token_info = tail(a.token_info, uint64_t{t0} * 8);
      b.out = tail(a.out, uint64_t{t0} * out_row * out_bytes);
      if (a.quantized_out) b.quantized_out = a.quantized_out->from_token(t0);
    }
    kernels::attention(*rec, kernels, b);
  }
}

uint32_t GpuModel::Impl::deterministic_attention_tokens() const {
  if (!options.deterministic) return UINT32_MAX;
  kernels::AttentionArgs one;
  one.tokens = 1;
  one.n_heads = config.n_heads;
  one.head_dim = config.head_dim_k;
  one.max_position = options.max_context;
  one.split_size = split_size(1, options.max_context);
  const uint64_t fit = kDeterministicScratchBytes / kernels::attention_scratch_bytes(one) / 16 * 16;
  return static_cast<uint32_t>(std::clamp<uint64_t>(fit, kDeterministicMinTokens, kDeterministicMaxTokens));
}

void GpuModel::Impl::ffn_block(const DeviceLayer& w, uint32_t l, uint32_t T) {
  const uint32_t n_ff = config.n_ff;
  if (w.w_gate_up.buffer.valid() && q8(w.w_gate_up, T)) {
    // One product: gate and up rows of norm(x), combined by SwiGLU as they are stored.
    settle_residual(T);
    kernels::MatvecQ8Args a =
        q8_args(w.w_gate_up, quantize_input(x, config.n_embd, &w.ffn_norm, T), gate.view(), T);
    a.norm = true;
    a.swiglu = true;
    // The decode step's down projection takes its input quantized by this product (no dispatch of its
    // own); batches quantize it apart, so that this product runs a row a lane (matvec_q8_shape).
    if (T == 1 && q8(w.w_down, T) && n_ff % 16 == 0) a.quantized_out = hidden_q();
    kernels::matvec_q8(*rec, kernels, a);
    residual_product(kProductDown, w.w_down, gate, T, a.quantized_out, norm_after_layer_if_q8(l, T));
    return;
  }
  if (w.w_gate_up.buffer.valid() && fused(w.w_gate_up, T)) {
    // Float weights (one token, or any under --deterministic): gate and up of norm(x) in one product,
    // combined by SwiGLU as stored.
    settle_residual(T);
    fused_normed_product(w.w_gate_up, w.ffn_norm, gate.view(), T, n_ff, true);
    residual_product(kProductDown, w.w_down, gate, T, std::nullopt, norm_after_layer_if_q8(l, T));
    return;
  }
  if (w.w_gate_up.buffer.valid() && T > 1) {
    // Batches: one product of [gate; up] (one norm, x converted to f16 once, one dispatch), then SwiGLU.
    normed_products(kProductGateUp, w.ffn_norm, {{&w.w_gate_up, 0}}, gate, 2 * n_ff, T);
    const bool half = half_out_for(w.w_down, up, T, kProductDown);  // the down product's x_f16 directly
    kernels::swiglu_joined(*rec, kernels, gate.view(0, uint64_t{T} * 2 * n_ff * 4),
                           half ? x_f16.view() : up.view(), T, n_ff, half);
    residual_product(kProductDown, w.w_down, up, T, std::nullopt, norm_after_layer_if_q8(l, T), half);
    return;
  }
  normed_products(kProductGateUp, w.ffn_norm, {{&w.w_gate, 0}}, gate, n_ff, T);
  normed_products(kProductGateUp, w.ffn_norm, {{&w.w_up, 0}}, up, n_ff, T);
  if (T == 1 && !options.deterministic && !q8(w.w_down, T)) {
    // The decode step without matvec_q8: SwiGLU folded into the down projection's loads instead.
    settle_residual(T);
    kernels::matvec_single_token_swiglu(*rec, kernels, product(w.w_down, gate, tmp, 1), up.view());
    pending_residual = true;
    return;
  }
  const bool half = half_out_for(w.w_down, gate, T, kProductDown);
  kernels::swiglu(*rec, kernels, gate.view(), up.view(), half ? x_f16.view() : gate.view(), T * n_ff, half);
  residual_product(kProductDown, w.w_down, gate, T, std::nullopt, norm_after_layer_if_q8(l, T), half);
}

void GpuModel::Impl::record(uint32_t T, uint32_t L, uint32_t max_position, LogitsOut read_back) {
  rec->begin();
  pending_residual = false;
  xq_norm = nullptr;
  const DeviceTensor* first_norm =
      config.n_layers > 0 && config.n_embd % 16 == 0 ? attn_norm_if_q8(0, T) : nullptr;
  // A fed step's token ids are the step before's greedy tokens, row t's for token t (GpuModel::submit).
  embed(fed ? io[1 - io_set].argmax_host : step_io().ids, weights.token_embd, x, T, first_norm);
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    attention_block(weights.layers[l], l, T, max_position);
    ffn_block(weights.layers[l], l, T);
  }
  settle_residual(T);
  const DeviceTensor& out = weights.logits_matrix();
  // The products below write the logits into host memory themselves, but for matmul's (a batch's many
  // rows, which a copy brings over).
  // A greedy or top-candidates step keeps them in device memory, where argmax_rows or top_k_rows reads them.
  const bool on_device = options.logits_copy || read_back != LogitsOut::Rows;
  const vk::BufferView logits = on_device ? logits_device.view() : logits_host.view();
  if (T == 1 && L == 1 && xq_norm == &weights.output_norm) {
    // The decode step's last product wrote x normed and quantized for the output matrix.
    kernels::MatvecQ8Args a = q8_args(out, normed_q(), logits, 1);
    a.norm = true;
    a.rows_per_lane = options.logits_rows_per_lane;
    kernels::matvec_q8(*rec, kernels, a);
    finish_logits(L, !on_device, read_back);
    return;
  }
  if (T == 1 && L == 1 && fused(out, T)) {
    fused_normed_product(out, weights.output_norm, logits, 1, config.n_vocab);
    finish_logits(L, !on_device, read_back);
    return;
  }
  // Only the rows that are sampled go through the final norm and the output matrix.
  kernels::GetRowsArgs gather;
  gather.table = x.view();
  gather.type = TensorType::F32;
  gather.n = config.n_embd;
  gather.row_begin = 0;
  gather.row_count = T;
  gather.ids = step_io().logits_index.view();
  gather.out = rows_x.view();
  gather.n_tokens = L;
  kernels::get_rows(*rec, kernels, gather);
  if (q8(out, L)) {
    kernels::MatvecQ8Args a =
        q8_args(out, quantize_input(rows_x, config.n_embd, &weights.output_norm, L), logits, L);
    a.norm = true;
    kernels::matvec_q8(*rec, kernels, a);
    finish_logits(L, !on_device, read_back);
  } else if (options.deterministic && fused(out, L)) {
    // The sampled rows as a decode step's fused product takes its one row: the same bits.
    fused_normed_product(out, weights.output_norm, logits, L, config.n_vocab, false, &rows_x);
    finish_logits(L, !on_device, read_back);
  } else {
    rms_norm(rows_x, weights.output_norm, rows_xn, L);
    matmul(out, rows_xn, logits_device, L);
    finish_logits(L, false, read_back);
  }
}

void GpuModel::Impl::finish_logits(uint32_t L, bool in_host_memory, LogitsOut read_back) {
  const vk::BufferView rows = logits_device.view(0, uint64_t{L} * config.n_vocab * 4);
  if (read_back == LogitsOut::Argmax)
    kernels::argmax_rows(*rec, kernels, rows, L, config.n_vocab,
                         step_io().argmax_host.view(0, uint64_t{L} * 4), argmax_scratch.view());
  else if (read_back == LogitsOut::Top || read_back == LogitsOut::TopWide) {
    const uint32_t k = read_back == LogitsOut::TopWide ? kWideTopCandidates : kTopCandidates;
    kernels::top_k_rows(*rec, kernels, rows, L, config.n_vocab, k, top_ids_host.view(0, uint64_t{L} * k * 4),
                        top_logits_host.view(0, uint64_t{L} * k * 4), top_scratch.view());
  } else if (!in_host_memory)
    rec->copy(rows, logits_host.view(0, uint64_t{L} * config.n_vocab * 4));
  rec->end();  // its barrier makes the writes visible to the host after the fence
}

}  // namespace kvtrie::engine
