#include "runner/engine/gpu_model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/error.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/matmul.h"
#include "kernels/ops/matvec.h"
#include "kernels/ops/ops.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/device.h"
#include "kernels/vk/query_pool.h"
#include "runner/engine/gpu_weights.h"

namespace kvtrie::engine {

namespace {

// Shader-visible f32/int32 scratch of the largest batch.
vk::Buffer scratch(const vk::Device& device, uint64_t elements, vk::MemoryKind kind = vk::MemoryKind::DeviceLocal) {
  return vk::Buffer(device, std::max<uint64_t>(elements, 4) * 4, kind);
}

}  // namespace

struct GpuModel::Impl {
  vk::Context& context;
  ModelConfig config;
  GpuModelOptions options;
  kernels::Kernels kernels;
  kernels::KvLayout layout;
  kernels::MatmulPath path;

  GpuWeights weights;

  // Activations for max_batch_tokens tokens.
  vk::Buffer x, xn, q, k, v, attn, gate, up, tmp, attn_scratch;
  vk::Buffer rows_x, rows_xn, logits_device;  // the rows whose logits are read back
  // Per-step inputs written by the host (host-visible, read by shaders directly: a few KiB per step).
  vk::Buffer ids, positions, slots, token_info, page_table, logits_index;
  vk::Buffer logits_host;
  uint32_t max_logits = 0;
  uint64_t compute_bytes = 0;
  std::vector<PageChunk> kv_chunks;  // the device tier: attention binds up to 4 chunks of equal size
  // Recorded steps, replayed while the batch shape repeats (decode): a recording depends only on the
  // token count, the logits rows and the attention split count; every per-step input is read from
  // host-visible buffers at execution. Least recently used one is re-recorded on a miss.
  struct Recording {
    uint32_t tokens = 0, logits = 0, splits = 0;
    uint64_t last_use = 0;
    std::unique_ptr<vk::CommandRecorder> recorder;
  };
  static constexpr size_t kMaxRecordings = 8;
  std::vector<Recording> recordings;
  uint64_t steps = 0, recordings_made = 0;
  vk::CommandRecorder* rec = nullptr;  // the recording being made
  std::unique_ptr<vk::QueryPool> profile_pool;

  // `weight_types`: the prewarm creates the pipelines of these types only (Kernels' contract).
  Impl(vk::Context& ctx, const ModelConfig& mc, const GpuModelOptions& opts,
       std::span<const TensorType> weight_types)
      : context(ctx),
        config(mc),
        options(opts),
        kernels(ctx, weight_types),
        layout{mc.n_layers, opts.page_tokens, mc.n_kv_heads * mc.head_dim_k},
        path(opts.deterministic ? kernels::MatmulPath::Deterministic : kernels::MatmulPath::Auto) {}

  void allocate_activations() {
    const vk::Device& dev = context.device();
    const uint64_t T = options.max_batch_tokens;
    const uint64_t q_dim = uint64_t{config.n_heads} * config.head_dim_k;
    const uint64_t kv_dim = layout.kv_dim;
    max_logits = std::min(options.max_batch_tokens, std::max(options.max_sequences, 1u));
    x = scratch(dev, T * config.n_embd);
    xn = scratch(dev, T * config.n_embd);
    q = scratch(dev, T * q_dim);
    k = scratch(dev, T * kv_dim);
    v = scratch(dev, T * kv_dim);
    attn = scratch(dev, T * q_dim);
    gate = scratch(dev, T * config.n_ff);
    up = scratch(dev, T * config.n_ff);
    tmp = scratch(dev, T * std::max<uint64_t>(config.n_embd, q_dim));
    kernels::AttentionArgs probe;
    probe.tokens = options.max_batch_tokens;
    probe.n_heads = config.n_heads;
    probe.n_kv_heads = config.n_kv_heads;
    probe.head_dim = config.head_dim_k;
    probe.layout = layout;
    probe.max_position = options.max_context;
    probe.split_size = split_size(options.max_batch_tokens);
    uint64_t attn_bytes = kernels::attention_scratch_bytes(probe);
    probe.tokens = std::min(options.max_batch_tokens, kSmallBatch);  // small batches split finer
    probe.split_size = split_size(probe.tokens);
    attn_bytes = std::max(attn_bytes, kernels::attention_scratch_bytes(probe));
    attn_scratch = vk::Buffer(dev, std::max<uint64_t>(attn_bytes, 16),
                              vk::MemoryKind::DeviceLocal);
    rows_x = scratch(dev, uint64_t{max_logits} * config.n_embd);
    rows_xn = scratch(dev, uint64_t{max_logits} * config.n_embd);
    logits_device = scratch(dev, uint64_t{max_logits} * config.n_vocab);
    const auto host = vk::MemoryKind::HostCoherent;
    ids = scratch(dev, T, host);
    positions = scratch(dev, T, host);
    slots = scratch(dev, T, host);
    token_info = scratch(dev, 2 * T, host);
    const uint64_t pages_per_seq = (options.max_context + options.page_tokens - 1) / options.page_tokens;
    page_table = scratch(dev, uint64_t{options.max_sequences} * pages_per_seq, host);
    logits_index = scratch(dev, max_logits, host);
    logits_host = scratch(dev, uint64_t{max_logits} * config.n_vocab, vk::MemoryKind::HostCached);
    for (const vk::Buffer* b : {&x, &xn, &q, &k, &v, &attn, &gate, &up, &tmp, &attn_scratch, &rows_x, &rows_xn,
                                &logits_device})
      compute_bytes += b->size();
  }

  static kernels::MatmulArgs product(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out,
                                     uint32_t tokens) {
    return {w.matrix(), in.view(), out.view(), tokens};
  }
  void matmul(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out, uint32_t tokens) {
    kernels::matmul(*rec, kernels, product(w, in, out, tokens), path);
  }

  // out = rms_norm(x) * weight over `rows` rows of n_embd.
  kernels::RmsNormArgs norm_args(const vk::Buffer& x_in, const DeviceTensor& weight, const vk::Buffer& out,
                                 uint32_t rows) const {
    kernels::RmsNormArgs a;
    a.x = x_in.view();
    a.weight = weight.view();
    a.y = out.view();
    a.rows = rows;
    a.n = config.n_embd;
    a.eps = config.rms_eps;
    return a;
  }
  void rms_norm(const vk::Buffer& x_in, const DeviceTensor& weight, const vk::Buffer& out, uint32_t rows) {
    kernels::rms_norm(*rec, kernels, norm_args(x_in, weight, out, rows));
  }
  // x += residual (in place), then out = rms_norm(x) * weight.
  void add_rms_norm(const vk::Buffer& x_inout, const vk::Buffer& residual, const DeviceTensor& weight,
                    const vk::Buffer& out, uint32_t rows) {
    kernels::add_rms_norm(*rec, kernels, norm_args(x_inout, weight, out, rows), residual.view());
  }
  // Per-head norm in place (qwen3 q/k norm): tokens * heads rows of head_dim.
  void head_norm(const vk::Buffer& buf, const DeviceTensor& weight, uint32_t tokens, uint32_t heads) {
    kernels::RmsNormArgs a = norm_args(buf, weight, buf, tokens * heads);
    a.n = config.head_dim_k;
    a.heads = heads;
    kernels::rms_norm(*rec, kernels, a);
  }

  kernels::RopeArgs rope_args(const vk::Buffer& buf, uint32_t tokens, uint32_t heads) const {
    kernels::RopeArgs a;
    a.x = buf.view();
    a.positions = positions.view();
    if (weights.rope_freqs.buffer.valid()) a.freq_factors = weights.rope_freqs.view();
    a.n_tokens = tokens;
    a.n_heads = heads;
    a.head_dim = config.head_dim_k;
    a.rope_dims = config.rope_dims ? config.rope_dims : config.head_dim_k;
    a.freq_base = config.rope_freq_base;
    a.mode = config.rope_type == RopeType::Neox ? kernels::RopeMode::Neox : kernels::RopeMode::Normal;
    return a;
  }
  void rope(const vk::Buffer& buf, uint32_t tokens, uint32_t heads) {
    kernels::rope(*rec, kernels, rope_args(buf, tokens, heads));
  }

  void embed(const vk::Buffer& index, const DeviceTensor& table, const vk::Buffer& out, uint32_t tokens) {
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
      kernels::get_rows(*rec, kernels, a);
    }
  }

  // Context positions per attention split. Decode batches are small, so their few sequences are spread
  // over more work groups with finer splits; --deterministic keeps one split size for every batch (a
  // token's result must not depend on its batch).
  static constexpr uint32_t kSmallBatch = 32;
  uint32_t split_size(uint32_t tokens) const {
    return !options.deterministic && tokens <= kSmallBatch ? 64 : kernels::AttentionArgs{}.split_size;
  }

  // The recording for this shape: replayed when one exists, else made in the least recently used slot.
  vk::CommandRecorder& recording_for(uint32_t T, uint32_t L, uint32_t max_position) {
    const uint32_t splits = max_position / split_size(T) + 1;
    ++steps;
    for (Recording& r : recordings)
      if (r.tokens == T && r.logits == L && r.splits == splits) {
        r.last_use = steps;
        return *r.recorder;
      }
    Recording* slot = nullptr;
    if (recordings.size() < kMaxRecordings) {
      slot = &recordings.emplace_back();
      slot->recorder = std::make_unique<vk::CommandRecorder>(context);
    } else {
      slot = &*std::min_element(recordings.begin(), recordings.end(),
                                [](const Recording& a, const Recording& b) { return a.last_use < b.last_use; });
    }
    *slot = {T, L, splits, steps, std::move(slot->recorder)};
    slot->recorder->set_profiling(profile_pool.get());
    rec = slot->recorder.get();
    record(T, L, max_position);
    ++recordings_made;
    return *slot->recorder;
  }

  void record(uint32_t T, uint32_t L, uint32_t max_position) {
    const uint32_t q_dim = config.n_heads * config.head_dim_k;
    const uint32_t kv_dim = layout.kv_dim;
    rec->begin();
    embed(ids, weights.token_embd, x, T);
    for (uint32_t l = 0; l < config.n_layers; ++l) {
      const DeviceLayer& w = weights.layers[l];
      // The previous layer's FFN output (in tmp) joins the residual stream inside this layer's first norm.
      if (l == 0)
        rms_norm(x, w.attn_norm, xn, T);
      else
        add_rms_norm(x, tmp, w.attn_norm, xn, T);
      matmul(w.wq, xn, q, T);
      matmul(w.wk, xn, k, T);
      matmul(w.wv, xn, v, T);
      if (config.has_qkv_bias) {
        kernels::add_bias(*rec, kernels, q.view(), w.bq.view(), T, q_dim);
        kernels::add_bias(*rec, kernels, k.view(), w.bk.view(), T, kv_dim);
        kernels::add_bias(*rec, kernels, v.view(), w.bv.view(), T, kv_dim);
      }
      if (config.has_qk_norm) {
        head_norm(q, w.q_norm, T, config.n_heads);
        head_norm(k, w.k_norm, T, config.n_kv_heads);
      }
      // Normal-mode rope rotates K on its way into the pages (one dispatch and one barrier fewer).
      const kernels::RopeArgs k_rope = rope_args(k, T, config.n_kv_heads);
      const bool fused_rope = k_rope.mode == kernels::RopeMode::Normal;
      rope(q, T, config.n_heads);
      if (!fused_rope) rope(k, T, config.n_kv_heads);
      for (const PageChunk& chunk : kv_chunks) {
        kernels::KvWriteArgs kw;
        kw.k = k.view();
        kw.v = v.view();
        kw.slots = slots.view();
        kw.pages = chunk.view;
        kw.layout = layout;
        kw.layer = l;
        kw.n_tokens = T;
        kw.page_begin = chunk.page_begin;
        kw.page_count = chunk.page_count;
        if (fused_rope)
          kernels::kv_write_rope(*rec, kernels, kw, k_rope);
        else
          kernels::kv_write(*rec, kernels, kw);
      }
      kernels::AttentionArgs at;
      at.q = q.view();
      at.kv_pages = kv_chunks[0].view;
      if (kv_chunks.size() > 1) {
        at.pages_per_binding = kv_chunks[0].page_count;
        for (size_t c = 1; c < kv_chunks.size(); ++c) at.kv_pages_more[c - 1] = kv_chunks[c].view;
      }
      at.page_table = page_table.view();
      at.token_info = token_info.view();
      at.scratch = attn_scratch.view();
      at.out = attn.view();
      at.tokens = T;
      at.n_heads = config.n_heads;
      at.n_kv_heads = config.n_kv_heads;
      at.head_dim = config.head_dim_k;
      at.layout = layout;
      at.layer = l;
      at.max_position = max_position;
      at.split_size = split_size(T);
      kernels::attention(*rec, kernels, at);
      matmul(w.wo, attn, tmp, T);
      add_rms_norm(x, tmp, w.ffn_norm, xn, T);  // x += attention output; xn = ffn_norm(x)
      matmul(w.w_gate, xn, gate, T);
      matmul(w.w_up, xn, up, T);
      if (T == 1 && !options.deterministic) {  // the decode step: SwiGLU inside the down projection
        kernels::matvec_single_token_swiglu(*rec, kernels, product(w.w_down, gate, tmp, 1), up.view());
      } else {
        kernels::swiglu(*rec, kernels, gate.view(), up.view(), gate.view(), T * config.n_ff);
        matmul(w.w_down, gate, tmp, T);
      }
    }
    kernels::add(*rec, kernels, x.view(), tmp.view(), x.view(), T * config.n_embd);  // the last layer's FFN
    // Only the rows that are sampled go through the final norm and the output matrix.
    kernels::GetRowsArgs gather;
    gather.table = x.view();
    gather.type = TensorType::F32;
    gather.n = config.n_embd;
    gather.row_begin = 0;
    gather.row_count = T;
    gather.ids = logits_index.view();
    gather.out = rows_x.view();
    gather.n_tokens = L;
    kernels::get_rows(*rec, kernels, gather);
    rms_norm(rows_x, weights.output_norm, rows_xn, L);
    matmul(weights.logits_matrix(), rows_xn, logits_device, L);
    rec->copy(logits_device.view(0, uint64_t{L} * config.n_vocab * 4),
                  logits_host.view(0, uint64_t{L} * config.n_vocab * 4));
    rec->end();
  }

  void write_inputs(const Batch& batch, uint32_t& max_position) {
    const auto T = batch.tokens.size();
    auto* id = static_cast<int32_t*>(ids.data());
    auto* pos = static_cast<int32_t*>(positions.data());
    auto* slot = static_cast<int32_t*>(slots.data());
    auto* info = static_cast<uint32_t*>(token_info.data());
    auto* table = static_cast<uint32_t*>(page_table.data());
    auto* index = static_cast<uint32_t*>(logits_index.data());
    std::vector<uint32_t> offsets(batch.page_tables.size());
    uint64_t used = 0;
    const uint64_t capacity = page_table.size() / 4;
    for (size_t s = 0; s < batch.page_tables.size(); ++s) {
      offsets[s] = static_cast<uint32_t>(used);
      KVTRIE_CHECK(used + batch.page_tables[s].size() <= capacity, "page tables exceed the batch's capacity");
      std::copy(batch.page_tables[s].begin(), batch.page_tables[s].end(), table + used);
      used += batch.page_tables[s].size();
    }
    max_position = 0;
    const uint32_t P = options.page_tokens;
    for (size_t t = 0; t < T; ++t) {
      const uint32_t s = batch.seq[t], p = batch.positions[t];
      KVTRIE_CHECK(p / P < batch.page_tables[s].size(), "a token's position is outside its page table");
      id[t] = batch.tokens[t];
      pos[t] = static_cast<int32_t>(p);
      slot[t] = static_cast<int32_t>(batch.page_tables[s][p / P] * P + p % P);
      info[2 * t] = offsets[s];
      info[2 * t + 1] = p;
      max_position = std::max(max_position, p);
    }
    for (size_t i = 0; i < batch.logits_for.size(); ++i) index[i] = batch.logits_for[i];
  }
};

GpuModel::GpuModel(vk::Context& context, const GgufFile& file, const ModelConfig& config,
                   const GpuModelOptions& options) {
  KVTRIE_CHECK(options.max_batch_tokens > 0 && options.max_sequences > 0, "empty batch limits");
  const ModelWeights weights = ModelWeights::from_gguf(file, config);
  impl_ = std::make_unique<Impl>(context, config, options, weight_types(weights));
  impl_->weights = upload_weights(context, weights, config);
  impl_->allocate_activations();
}

GpuModel::~GpuModel() = default;

const ModelConfig& GpuModel::config() const { return impl_->config; }
const GpuModelOptions& GpuModel::options() const { return impl_->options; }
kernels::KvLayout GpuModel::kv_layout() const { return impl_->layout; }
uint64_t GpuModel::weight_bytes() const { return impl_->weights.bytes; }
uint64_t GpuModel::compute_bytes() const { return impl_->compute_bytes; }

void GpuModel::bind_pages(const VkPageStore& pages) {
  const std::span<const PageChunk> chunks = pages.device_chunks();
  KVTRIE_CHECK(!chunks.empty() && chunks.size() <= kMaxPageChunks, "attention binds 1 to 4 device KV chunks");
  KVTRIE_CHECK(pages.layout().page_bytes() == impl_->layout.page_bytes(), "KV page layout mismatch");
  for (size_t c = 0; c + 1 < chunks.size(); ++c)
    KVTRIE_CHECK(chunks[c].page_count == chunks[0].page_count && chunks[c].page_begin == c * chunks[0].page_count,
                 "device KV chunks must hold equal runs of pages (all but the last)");
  impl_->kv_chunks.assign(chunks.begin(), chunks.end());
}

void GpuModel::forward(const Batch& batch, std::vector<float>& logits) {
  Impl& m = *impl_;
  KVTRIE_CHECK(!m.kv_chunks.empty(), "bind_pages() before forward()");
  KVTRIE_CHECK(!batch.tokens.empty() && batch.tokens.size() <= m.options.max_batch_tokens,
               "batch size outside 1..max_batch_tokens");
  KVTRIE_CHECK(batch.logits_for.size() <= m.max_logits, "too many logits rows in one batch");
  KVTRIE_CHECK(batch.page_tables.size() <= m.options.max_sequences, "too many sequences in one batch");
  for (int32_t t : batch.tokens)
    KVTRIE_CHECK(t >= 0 && static_cast<uint32_t>(t) < m.config.n_vocab, "token id outside the vocabulary");
  uint32_t max_position = 0;
  m.write_inputs(batch, max_position);  // nothing is in flight: every step is waited for
  vk::CommandRecorder& step = m.recording_for(static_cast<uint32_t>(batch.tokens.size()),
                                              static_cast<uint32_t>(batch.logits_for.size()), max_position);
  m.rec = &step;
  step.submit_and_wait();
  const size_t n = batch.logits_for.size() * m.config.n_vocab;
  m.logits_host.invalidate();
  logits.resize(n);
  std::memcpy(logits.data(), m.logits_host.data(), n * sizeof(float));
}

}  // namespace kvtrie::engine

namespace kvtrie::engine {

void GpuModel::set_profiling(bool on) {
  Impl& m = *impl_;
  m.recordings.clear();  // re-record with or without timestamps
  m.profile_pool = on ? std::make_unique<vk::QueryPool>(m.context.device(), kProfileQueries) : nullptr;
}

std::vector<vk::DispatchTime> GpuModel::last_dispatch_times() const {
  return impl_->rec ? impl_->rec->dispatch_times() : std::vector<vk::DispatchTime>{};
}

uint64_t GpuModel::recordings_made() const { return impl_->recordings_made; }

}  // namespace kvtrie::engine
