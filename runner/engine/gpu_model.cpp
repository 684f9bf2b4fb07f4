#include "runner/engine/gpu_model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/ops/add.h"
#include "kernels/ops/add_bias.h"
#include "kernels/ops/attention.h"
#include "kernels/ops/convert.h"
#include "kernels/ops/get_rows.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/kv_write.h"
#include "kernels/ops/matmul.h"
#include "kernels/ops/matvec.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/ops/rms_norm.h"
#include "kernels/ops/rope.h"
#include "kernels/ops/swiglu.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/device.h"
#include "kernels/vk/query_pool.h"
#include "runner/engine/gpu_weights.h"

namespace kvtrie::engine {

namespace {

// Shader-visible f32/int32 scratch of the largest batch.
vk::Buffer scratch(const vk::Device& device, uint64_t elements,
                   vk::MemoryKind kind = vk::MemoryKind::DeviceLocal) {
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

  // Activations for max_batch_tokens tokens. qkv holds a token's Q, K and V side by side (one product
  // writes all three where the matrices are joined); the others are one vector per token.
  vk::Buffer x, xn, qkv, attn, gate, up, tmp, attn_scratch, split_counters;
  uint32_t qkv_stride = 0, k_col = 0, v_col = 0;  // floats per token in qkv; where K and V start
  // The residual stream x lacks tmp (a product that did not add itself into x); settled before x is read.
  bool pending_residual = false;
  // matvec_q8's inputs quantized once (kernels::QuantizedX), q_stride values a token: xq the normed
  // residual stream (with its groups' sums of squares), hq a hidden vector (attention's output, the SwiGLU
  // output that the gate/up product writes quantized while its own input xq is read).
  kernels::QuantizedBuffers xq, hq;
  // The norm whose product xq already holds for the current x: the residual product that wrote x wrote it
  // (residual_product's next_norm), so the next normed product needs no quantize dispatch. Null otherwise.
  const DeviceTensor* xq_norm = nullptr;
  vk::Buffer x_f16;  // a product's x as f16, for matmul's tensor-core paths (give_f16_x)
  uint32_t q_stride = 0;
  vk::Buffer rows_x, rows_xn, logits_device;  // the rows whose logits are read back
  // Per-step inputs written by the host (host-visible, read by shaders directly: a few KiB per step).
  vk::Buffer split_scratch;  // split-K partial outputs of tensor-core products (empty: no split-K)
  vk::Buffer ids, positions, slots, token_info, page_table, logits_index;
  vk::Buffer logits_host;
  uint32_t max_logits = 0;
  uint64_t compute_bytes = 0;
  std::vector<PageChunk> kv_chunks;  // the device tier: attention binds up to 4 chunks of equal size
  // Recorded steps, replayed while the batch shape repeats (decode): a recording depends only on the
  // token count, the logits rows and the attention split count; every per-step input is read from
  // host-visible buffers at execution. Least recently used one is re-recorded on a miss.
  struct Recording {
    uint32_t tokens = 0, logits = 0, split = 0, splits = 0;  // splits of `split` attention positions
    bool decode = false;                                     // attention's decode pass (decode_step)
    uint64_t last_use = 0;
    std::unique_ptr<vk::CommandRecorder> recorder;
  };
  static constexpr size_t kMaxRecordings = 8;
  std::vector<Recording> recordings;
  uint64_t steps = 0, recordings_made = 0;
  vk::CommandRecorder* rec = nullptr;  // the recording being made
  bool decode_step = false;            // this step's tokens are each alone in their sequence (write_inputs)
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
    // K and V start at binding-aligned columns (views of qkv are bound at those offsets).
    const uint32_t align =
        static_cast<uint32_t>(std::max<uint64_t>(dev.info().min_storage_buffer_offset_alignment / 4, 1));
    k_col = static_cast<uint32_t>((q_dim + align - 1) / align * align);
    v_col = static_cast<uint32_t>(k_col + (kv_dim + align - 1) / align * align);
    qkv_stride = static_cast<uint32_t>(v_col + kv_dim);
    qkv = scratch(dev, T * qkv_stride);
    attn = scratch(dev, T * q_dim);
    gate = scratch(dev, T * 2 * config.n_ff);  // prefill's joined gate/up product: both halves
    up = scratch(dev, T * config.n_ff);
    tmp = scratch(dev, T * std::max<uint64_t>(config.n_embd, q_dim));
    // Split-K partials of the 32-token tile's products (kernels/ops/matmul.h): 16 splits of a product as
    // wide as Q/K/V, the residual stream or one FFN half (gate/up, twice as wide, splits less).
    if (kernels::coopmat_supported(dev) && options.k_splits != 1 && T > kQ8Tokens)
      split_scratch =
          scratch(dev, kernels::split_scratch_floats(
                           static_cast<uint32_t>(std::min<uint64_t>(T, kernels::kSmallTile.tokens())),
                           std::max({qkv_stride, config.n_embd, config.n_ff}), 16));
    kernels::AttentionArgs probe;
    probe.tokens = std::min(options.max_batch_tokens, deterministic_attention_tokens());
    probe.n_heads = config.n_heads;
    probe.n_kv_heads = config.n_kv_heads;
    probe.head_dim = config.head_dim_k;
    probe.layout = layout;
    probe.max_position = options.max_context;
    probe.split_size = split_size(probe.tokens, options.max_context);
    uint64_t attn_bytes = kernels::attention_scratch_bytes(probe);
    // Prefill chunks of T tokens make at most ceil(kPrefillSplitTokens / T) splits (split_size), and no more
    // than kLargeBatchSplit positions each allow.
    for (uint32_t tokens = kSmallBatch + 1; tokens <= options.max_batch_tokens; ++tokens) {
      probe.tokens = tokens;
      probe.split_size = kLargeBatchSplit;
      const uint32_t splits =
          std::min((kPrefillSplitTokens + tokens - 1) / tokens, options.max_context / kLargeBatchSplit + 1);
      probe.max_position = (splits - 1) * kLargeBatchSplit;
      attn_bytes = std::max(attn_bytes, kernels::attention_scratch_bytes(probe));
    }
    // Small batches split finer, by their context: the most splits come just below a power of two (where
    // the split size doubles) or at the longest context.
    probe.tokens = std::min(options.max_batch_tokens, kSmallBatch);
    for (uint64_t end = 1; end <= uint64_t{options.max_context} * 2; end *= 2) {
      probe.max_position = static_cast<uint32_t>(std::min<uint64_t>(end - 1, options.max_context));
      probe.split_size = split_size(probe.tokens, probe.max_position);
      attn_bytes = std::max(attn_bytes, kernels::attention_scratch_bytes(probe));
    }
    attn_scratch = vk::Buffer(dev, std::max<uint64_t>(attn_bytes, 16), vk::MemoryKind::DeviceLocal);
    // The decode pass's split counters (AttentionArgs::split_counters: at most a word per token and query
    // head), zero once here; each merge leaves them zero.
    split_counters = scratch(dev, std::min<uint64_t>(T, kSmallBatch) * config.n_heads);
    {
      vk::CommandRecorder zero(context);
      zero.begin();
      zero.fill(split_counters.view(), 0);
      zero.end();
      zero.submit_and_wait();
    }
    q_stride = static_cast<uint32_t>(
        (std::max({uint64_t{config.n_embd}, q_dim, uint64_t{config.n_ff}}) + 15) / 16 * 16);
    xq = kernels::QuantizedBuffers(dev, T, q_stride, true);
    hq = kernels::QuantizedBuffers(dev, T, q_stride, false);
    if (options.coopmat2 || (options.f16_x && kernels::coopmat_supported(dev)))
      x_f16 = vk::Buffer(dev, T * q_stride * 2 + 16, vk::MemoryKind::DeviceLocal);
    rows_x = scratch(dev, uint64_t{max_logits} * config.n_embd);
    rows_xn = scratch(dev, uint64_t{max_logits} * config.n_embd);
    logits_device = scratch(dev, uint64_t{max_logits} * config.n_vocab);
    const auto host = vk::MemoryKind::HostWritten;  // read by shaders every layer
    ids = scratch(dev, T, host);
    positions = scratch(dev, T, host);
    slots = scratch(dev, T, host);
    token_info = scratch(dev, 2 * T, host);
    const uint64_t pages_per_seq = (options.max_context + options.page_tokens - 1) / options.page_tokens;
    page_table = scratch(dev, uint64_t{options.max_sequences} * pages_per_seq, host);
    logits_index = scratch(dev, max_logits, host);
    logits_host = scratch(dev, uint64_t{max_logits} * config.n_vocab, vk::MemoryKind::HostCached);
    for (const vk::Buffer* b : {&x, &xn, &qkv, &attn, &gate, &up, &tmp, &attn_scratch, &rows_x, &rows_xn,
                                &logits_device, &x_f16, &split_scratch, &split_counters})
      compute_bytes += b->size();
  }

  kernels::MatmulArgs product(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out,
                              uint32_t tokens, GpuProduct which = kProductQkv) const {
    kernels::MatmulArgs a{w.matrix(), in.view(), out.view(), tokens};
    if (split_scratch.valid()) a.split_scratch = split_scratch.view();
    a.k_splits = options.k_splits;
    if (const std::optional<kernels::CoopmatTile>& tile = options.f16x_tiles[which]) a.f16x_tile = &*tile;
    return a;
  }
  // converted: the producer of `in` also wrote it as f16 into x_f16 (takes_f16_x said it would be read so).
  void matmul(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out, uint32_t tokens,
              GpuProduct which = kProductQkv, bool converted = false) {
    kernels::MatmulArgs a = product(w, in, out, tokens, which);
    kernels::matmul(*rec, kernels, a, give_f16_x(a, converted));
  }
  // Whether the product reads its x as f16 from x_f16 (CoopMat2 with options.coopmat2, else CoopMat with
  // options.f16_x), and through which path request.
  std::optional<kernels::MatmulPath> f16_x_path(const kernels::MatmulArgs& a) const {
    const vk::Device& dev = kernels.device();
    if (options.coopmat2 && kernels::coopmat2_wanted(dev, path, a)) return path;
    if (options.f16_x && path == kernels::MatmulPath::Auto &&
        kernels::resolve_matmul_path(dev, path, a) == kernels::MatmulPath::CoopMat &&
        kernels::coopmat_takes_f16_x(dev, a))
      return kernels::MatmulPath::CoopMat;  // explicitly: x_f16 must not turn Auto into CoopMat2
    return std::nullopt;
  }
  bool takes_f16_x(const kernels::MatmulArgs& a) const { return f16_x_path(a).has_value(); }
  // Sets a.x_f16 where the product reads x as f16, converting a.x into x_f16 first unless `converted` says
  // an earlier product of the same x, or x's producer, did. Returns the path to request.
  kernels::MatmulPath give_f16_x(kernels::MatmulArgs& a, bool& converted) {
    const std::optional<kernels::MatmulPath> f16 = f16_x_path(a);
    if (!f16) return path;
    const uint32_t count = a.tokens * (a.x_stride ? a.x_stride : a.w.cols);
    a.x_f16 = x_f16.view(0, uint64_t{count} * 2);
    if (!converted) kernels::convert_f16(*rec, kernels, a.x, a.x_f16, count);
    converted = true;
    return *f16;
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
  // half_out: out as f16 (the products' x_f16).
  void rms_norm(const vk::Buffer& x_in, const DeviceTensor& weight, const vk::Buffer& out, uint32_t rows,
                bool half_out = false) {
    kernels::RmsNormArgs a = norm_args(x_in, weight, out, rows);
    a.half_out = half_out;
    kernels::rms_norm(*rec, kernels, a);
  }
  // x += residual (in place), then out = rms_norm(x) * weight.
  void add_rms_norm(const vk::Buffer& x_inout, const vk::Buffer& residual, const DeviceTensor& weight,
                    const vk::Buffer& out, uint32_t rows, bool half_out = false) {
    kernels::RmsNormArgs a = norm_args(x_inout, weight, out, rows);
    a.half_out = half_out;
    kernels::add_rms_norm(*rec, kernels, a, residual.view());
  }
  // Per-head norm in place (qwen3 q/k norm): tokens * heads rows of head_dim, tokens qkv_stride apart.
  void head_norm(vk::BufferView buf, const DeviceTensor& weight, uint32_t tokens, uint32_t heads) {
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

  // Rope of the heads of q or k inside qkv (tokens qkv_stride apart).
  kernels::RopeArgs rope_args(vk::BufferView buf, uint32_t tokens, uint32_t heads) const {
    kernels::RopeArgs a;
    a.x = buf;
    a.token_stride = qkv_stride;
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
  void rope(vk::BufferView buf, uint32_t tokens, uint32_t heads) {
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

  // Context positions per attention split. Small batches on attention.comp (prefill chunks of up to 32
  // tokens, and decode steps where attention_decode does not run) spread each sequence over 32 / tokens
  // splits (at least 4) of 32 to 512 positions: on an H200 (sweep-attention, GPU timestamps), llama3-8b's
  // attention a layer was fastest at 16 splits for one sequence at context 512 (32 positions: 19 us) and 32
  // at 4096 (128: 42 us), and at 4 to 8 splits for 8 sequences (512: 128 positions, 39 us against 49 for 32;
  // 4096: 512 positions, 230 against 248 for 128); whole steps of 32 sequences at 512 went 869 -> 893 tok/s.
  // Larger batches have work groups enough and take long splits, fewer partial results to write and combine:
  // a split per kPrefillSplitTokens / tokens (a whole 512-token chunk takes one; on an H200, prefill of 4096
  // tokens of llama3-8b Q4_0 7,467 tok/s with splits of 1024, 7,714 with 4096; llama3-1b 32,613 -> 33,976;
  // on an H100 this rule against splits of 1024: 7,890 against 7,631 in chunks of 512, 5,619 against 5,578 in
  // chunks of 256, equal in chunks of 128 and 64),
  // but not below kLargeBatchSplit positions. --deterministic keeps one split
  // size for every batch (a token's result must not depend on its batch): 64. On an H100 (session 17) its
  // decode of llama3-8b Q4_0 is 6.9% / 8.5% / 13.6% below the default at contexts 512 / 2048 / 4096, where
  // 128 was 15-18% / 15% / 8-9% below; its prefill of 4096 tokens 4% slower.
  static constexpr uint32_t kSmallBatch = 32, kLargeBatchSplit = 1024, kDeterministicSplit = 64;
  // Tokens of one attention dispatch under --deterministic (attention_in_blocks): its partials take tokens x
  // heads x splits of the longest context, so blocks keep them within kDeterministicScratchBytes (16 to 256
  // tokens: llama3-8b 112 at a 4096-token context, 121 MB; 16 at 32768, 137 MB).
  static constexpr uint64_t kDeterministicScratchBytes = 128ull << 20;
  static constexpr uint32_t kDeterministicMinTokens = 16, kDeterministicMaxTokens = 256;
  static constexpr uint32_t kPrefillSplitTokens = 512, kDecodeMinSplit = 128, kDecodeMaxSplit = 512;
  static constexpr uint32_t kDecodeSplitsOfStep = 8;
  uint32_t split_size(uint32_t tokens, uint32_t max_position, bool decode = false) const {
    if (options.attention_split) return options.attention_split;
    if (options.deterministic) return kDeterministicSplit;
    if (tokens > kSmallBatch) {
      const uint32_t splits = (kPrefillSplitTokens + tokens - 1) / tokens;
      return std::max(kLargeBatchSplit, std::bit_ceil((max_position + splits) / splits));
    }
    const uint32_t splits = std::max(kSmallBatch / tokens, 4u);
    const uint32_t split =
        std::clamp<uint32_t>(std::bit_floor(std::max<uint32_t>(max_position / splits, 1)), 32, 512);
    if (!decode) return split;
    // attention_decode: a split per 8th of all the step's positions (8 to 16 splits), 128 to 512 (never fewer
    // than the rule above, so that its splits fit the scratch that rule sizes). On an H100, llama3-8b Q4_0
    // decode, tok/s with a 16th against an 8th (session 16): one sequence at 2048 308 / 309 against 331 /
    // 338, at 4096 291 / 298 against 309 / 307, at 1024 equal; 4 sequences at 1500 682 against 707; 8 at 512
    // 879 / 885 against 901 / 896; llama3-1b at 2048 883 / 900 against 975 / 950. (sweep-attention alone,
    // without the layer's products around it, had one sequence at 4096 fastest at a 16th.)
    const auto step_positions = static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{max_position} * tokens / kDecodeSplitsOfStep, kDecodeMaxSplit));
    return std::max(
        split, std::clamp(std::bit_floor(std::max(step_positions, 1u)), kDecodeMinSplit, kDecodeMaxSplit));
  }

  // The recording for this shape: replayed when one exists, else made in the least recently used slot.
  vk::CommandRecorder& recording_for(uint32_t T, uint32_t L, uint32_t max_position) {
    const uint32_t split = split_size(T, max_position, decode_step), splits = max_position / split + 1;
    ++steps;
    for (Recording& r : recordings)
      if (r.tokens == T && r.logits == L && r.split == split && r.splits == splits &&
          r.decode == decode_step) {
        r.last_use = steps;
        return *r.recorder;
      }
    Recording* slot = nullptr;
    if (recordings.size() < kMaxRecordings) {
      slot = &recordings.emplace_back();
      slot->recorder = std::make_unique<vk::CommandRecorder>(context);
    } else {
      slot =
          &*std::min_element(recordings.begin(), recordings.end(),
                             [](const Recording& a, const Recording& b) { return a.last_use < b.last_use; });
    }
    *slot = {T, L, split, splits, decode_step, steps, std::move(slot->recorder)};
    slot->recorder->set_profiling(profile_pool.get());
    rec = slot->recorder.get();
    record(T, L, max_position);
    ++recordings_made;
    return *slot->recorder;
  }

  // The decode step, batches of up to kQ8Tokens tokens (kQ8TokensNoCoopmat without cooperative matrices:
  // bigger batches are faster on tensor cores, kernels/ops/matmul.h) and every product under
  // --deterministic take matvec_q8 where the weights allow: it folds the norm before a product, the
  // residual add after it and the FFN's SwiGLU, and it is batch-invariant.
  static constexpr uint32_t kQ8Tokens = 16, kQ8TokensNoCoopmat = 32;
  bool q8(const DeviceTensor& w, uint32_t T) const {
    const uint32_t most = !kernels::coopmat_supported(context.device()) ? kQ8TokensNoCoopmat
                          : options.q8_max_tokens                       ? options.q8_max_tokens
                                                                        : kQ8Tokens;
    return (options.deterministic || T <= most) && kernels::matvec_q8_supported(w.type, w.cols);
  }
  kernels::MatvecQ8Args q8_args(const DeviceTensor& w, const kernels::QuantizedX& in, vk::BufferView out,
                                uint32_t T, uint32_t y_stride = 0) const {
    kernels::MatvecQ8Args a;
    a.product = {w.matrix(), {}, out, T, 0, y_stride};
    a.x = in;
    a.norm_eps = config.rms_eps;
    return a;
  }
  // Where matvec_q8 finds its inputs quantized: the normed residual stream, and a hidden vector.
  kernels::QuantizedX normed_q() const { return xq.view(); }
  kernels::QuantizedX hidden_q() const { return hq.view(); }
  // A product input quantized once (rms_norm(in) * norm into normed_q() when a norm is given, else into
  // hidden_q()) for every matvec_q8 product that reads it: a dispatch and a barrier of its own, but the
  // products then need no x work and run in small work groups (kernels/ops/matvec_q8.h).
  kernels::QuantizedX quantize_input(const vk::Buffer& in, uint32_t cols, const DeviceTensor* norm,
                                     uint32_t T) {
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

  // Adds a pending product output into the residual stream.
  void settle_residual(uint32_t T) {
    if (pending_residual) {
      kernels::add(*rec, kernels, x.view(), tmp.view(), x.view(), T * config.n_embd);
      xq_norm = nullptr;
    }
    pending_residual = false;
  }
  // xn = rms_norm(x) * weight (half: into x_f16 as f16 instead), settling a pending residual in the same
  // dispatch.
  void norm_into_xn(const DeviceTensor& weight, uint32_t T, bool half = false) {
    const vk::Buffer& out = half ? x_f16 : xn;
    if (pending_residual) {
      add_rms_norm(x, tmp, weight, out, T, half);
      xq_norm = nullptr;
    } else {
      rms_norm(x, weight, out, T, half);
    }
    pending_residual = false;
  }
  // The columns [col, col + w.rows) of out (a token every out_stride floats) = w . rms_norm(x) * norm,
  // for each (w, col); the norm is folded into the products where they all take matvec_q8.
  // With to_pages (one part, on matvec_q8): the product also rotates Q and stores K and V in the pages.
  void normed_products(GpuProduct which, const DeviceTensor& norm,
                       std::initializer_list<std::pair<const DeviceTensor*, uint32_t>> parts,
                       const vk::Buffer& out, uint32_t out_stride, uint32_t T,
                       const kernels::QkvToPages* to_pages = nullptr) {
    bool fold = true;
    for (const auto& [w, col] : parts) fold = fold && q8(*w, T);
    if (fold) {
      settle_residual(T);
      const kernels::QuantizedX quantized = quantize_input(x, config.n_embd, &norm, T);
      for (const auto& [w, col] : parts) {
        kernels::MatvecQ8Args a = q8_args(
            *w, quantized, out.view(uint64_t{col} * 4, out.size() - uint64_t{col} * 4), T, out_stride);
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
        fused_normed_product(*w, norm, out.view(uint64_t{col} * 4, out.size() - uint64_t{col} * 4));
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
  // x += w . in: folded into the product by matvec_q8 (on `quantized` when the product before wrote `in`
  // quantized, else quantized here), else the product goes to tmp, added later. The decode step's product
  // also writes the new x quantized and normed by next_norm (the norm of the product after it, when that
  // one takes matvec_q8) into xq: a quantize dispatch and a barrier level fewer (64 a step in llama3-8b).
  // converted: in's producer wrote it as f16 into x_f16 (half_out_for said the product reads it so).
  void residual_product(GpuProduct which, const DeviceTensor& w, const vk::Buffer& in, uint32_t T,
                        const std::optional<kernels::QuantizedX>& quantized, const DeviceTensor* next_norm,
                        bool converted = false) {
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
      kernels::matvec_single_token_fused(*rec, kernels, a);
      return;
    }
    matmul(w, in, tmp, T, which, converted);
    pending_residual = true;
  }
  // The decode step's products of float weights fold the norm before them, the residual add after them and
  // the FFN's SwiGLU (matvec_single_token_fused: a dispatch and a barrier level each fewer), outside
  // --deterministic (they are not batch-invariant).
  bool fused(const DeviceTensor& w, uint32_t T) const {
    return T == 1 && !options.deterministic && kernels::matvec_fused_supported(context.device(), w.matrix());
  }
  // out = w . rms_norm(x) * norm for one token (fused(w, 1)); swiglu: w is [gate; up], combined as stored.
  void fused_normed_product(const DeviceTensor& w, const DeviceTensor& norm, vk::BufferView out,
                            bool swiglu = false) {
    kernels::FusedMatvecArgs a;
    a.w = w.matrix();
    a.x = x.view();
    a.y = out;
    a.norm = norm.view();
    a.eps = config.rms_eps;
    a.swiglu = swiglu;
    kernels::matvec_single_token_fused(*rec, kernels, a);
  }
  // Whether residual_product's matmul of w over in will read in as f16: its producer then writes it so.
  bool half_out_for(const DeviceTensor& w, const vk::Buffer& in, uint32_t T, GpuProduct which) const {
    return !q8(w, T) && takes_f16_x(product(w, in, tmp, T, which));
  }
  // The norm before the products that read x next, when they take matvec_q8 (residual_product's
  // next_norm): the FFN's after attention, the next layer's attention's (or the output norm's) after it.
  const DeviceTensor* ffn_norm_if_q8(const DeviceLayer& w, uint32_t T) const {
    const DeviceTensor& first = w.w_gate_up.buffer.valid() ? w.w_gate_up : w.w_gate;
    return q8(first, T) && (w.w_gate_up.buffer.valid() || q8(w.w_up, T)) ? &w.ffn_norm : nullptr;
  }
  const DeviceTensor* norm_after_layer_if_q8(uint32_t l, uint32_t T) const {
    if (l + 1 == config.n_layers) {
      const DeviceTensor& out = weights.logits_matrix();
      return T == 1 && q8(out, 1) ? &weights.output_norm : nullptr;
    }
    const DeviceLayer& n = weights.layers[l + 1];
    const bool joined = n.wqkv.buffer.valid();
    const bool all_q8 = joined ? q8(n.wqkv, T) : q8(n.wq, T) && q8(n.wk, T) && q8(n.wv, T);
    return all_q8 ? &n.attn_norm : nullptr;
  }

  // What comes between the Q/K/V products and attention when the product does not do it: biases, head
  // norms and rope, then K and V into the pages of each chunk.
  void store_kv(const DeviceLayer& w, uint32_t l, uint32_t T, vk::BufferView q, vk::BufferView k,
                vk::BufferView v, const kernels::RopeArgs& k_rope, const kernels::RopeArgs& q_rope) {
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
      kw.slots = slots.view();
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

  void attention_block(const DeviceLayer& w, uint32_t l, uint32_t T, uint32_t max_position) {
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
      to_pages->slots = slots.view();
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
    at.split_size = split_size(T, max_position, decode_step);
    // Prefill blocks take the tensor cores where the device has them, decode steps attention_decode (neither
    // is batch-invariant).
    at.tensor_cores = !options.deterministic && T > kSmallBatch;
    at.decode = decode_step;
    if (decode_step) at.split_counters = split_counters.view();
    // The o projection's input quantized by attention's combine pass (no dispatch of its own).
    if (q8(w.wo, T) && config.head_dim_k % 16 == 0) at.quantized_out = hidden_q();
    // ... or as f16 where the o projection reads it so.
    at.half_out = half_out_for(w.wo, attn, T, kProductO);
    if (at.half_out) at.out = x_f16.view();
    attention_in_blocks(at);
    residual_product(kProductO, w.wo, attn, T, at.quantized_out, ffn_norm_if_q8(w, T), at.half_out);
  }

  // Attention for a.tokens tokens, in blocks of deterministic_attention_tokens() under --deterministic: its
  // fixed split size makes partials for every split of every token, a scratch that grows with the context,
  // and a token's work does not depend on its block, so blocks give the same bits.
  void attention_in_blocks(const kernels::AttentionArgs& a) {
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
  // Tokens of one attention dispatch under --deterministic (all of them otherwise): as many as keep the
  // partials of a step at the longest context within kDeterministicScratchBytes, a multiple of 16.
  uint32_t deterministic_attention_tokens() const {
    if (!options.deterministic) return UINT32_MAX;
    kernels::AttentionArgs one;
    one.tokens = 1;
    one.n_heads = config.n_heads;
    one.head_dim = config.head_dim_k;
    one.max_position = options.max_context;
    one.split_size = kDeterministicSplit;
    const uint64_t fit = kDeterministicScratchBytes / kernels::attention_scratch_bytes(one) / 16 * 16;
    return static_cast<uint32_t>(std::clamp<uint64_t>(fit, kDeterministicMinTokens, kDeterministicMaxTokens));
  }

  void ffn_block(const DeviceLayer& w, uint32_t l, uint32_t T) {
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
      // One token of float weights: gate and up of norm(x) in one product, combined by SwiGLU as stored.
      settle_residual(T);
      fused_normed_product(w.w_gate_up, w.ffn_norm, gate.view(), true);
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

  void record(uint32_t T, uint32_t L, uint32_t max_position) {
    rec->begin();
    pending_residual = false;
    xq_norm = nullptr;
    embed(ids, weights.token_embd, x, T);
    for (uint32_t l = 0; l < config.n_layers; ++l) {
      attention_block(weights.layers[l], l, T, max_position);
      ffn_block(weights.layers[l], l, T);
    }
    settle_residual(T);
    const DeviceTensor& out = weights.logits_matrix();
    if (T == 1 && L == 1 && xq_norm == &weights.output_norm) {
      // The decode step's last product wrote x normed and quantized for the output matrix.
      kernels::MatvecQ8Args a = q8_args(out, normed_q(), logits_device.view(), 1);
      a.norm = true;
      kernels::matvec_q8(*rec, kernels, a);
      read_logits(L);
      return;
    }
    if (T == 1 && L == 1 && fused(out, T)) {
      fused_normed_product(out, weights.output_norm, logits_device.view());
      read_logits(L);
      return;
    }
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
    if (q8(out, L)) {
      kernels::MatvecQ8Args a = q8_args(out, quantize_input(rows_x, config.n_embd, &weights.output_norm, L),
                                        logits_device.view(), L);
      a.norm = true;
      kernels::matvec_q8(*rec, kernels, a);
    } else {
      rms_norm(rows_x, weights.output_norm, rows_xn, L);
      matmul(out, rows_xn, logits_device, L);
    }
    read_logits(L);
  }
  // The step's L logits rows to the host, and the recording's end.
  void read_logits(uint32_t L) {
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
    // The tables go to the device as they lie in the batch: sequence s's starts at table_begin[s].
    KVTRIE_CHECK(batch.pages.size() <= page_table.size() / 4, "page tables exceed the batch's capacity");
    std::copy(batch.pages.begin(), batch.pages.end(), table);
    max_position = 0;
    // A decode step: a few tokens, each alone in its sequence (T is small: the quadratic check is cheap).
    decode_step = options.decode_attention && !options.deterministic && T <= kSmallBatch;
    for (size_t t = 0; t < T && decode_step; ++t)
      for (size_t u = 0; u < t; ++u) decode_step = decode_step && batch.seq[u] != batch.seq[t];
    const uint32_t P = options.page_tokens;
    for (size_t t = 0; t < T; ++t) {
      const uint32_t s = batch.seq[t], p = batch.positions[t];
      KVTRIE_CHECK(s < batch.sequences(), "a token's sequence has no page table");
      const std::span<const uint32_t> pages_of_s = batch.page_table(s);
      KVTRIE_CHECK(p / P < pages_of_s.size(), "a token's position is outside its page table");
      id[t] = batch.tokens[t];
      pos[t] = static_cast<int32_t>(p);
      slot[t] = static_cast<int32_t>(pages_of_s[p / P] * P + p % P);
      info[2 * t] = batch.table_begin[s];
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

const ModelConfig& GpuModel::config() const {
  return impl_->config;
}
const GpuModelOptions& GpuModel::options() const {
  return impl_->options;
}
kernels::KvLayout GpuModel::kv_layout() const {
  return impl_->layout;
}
uint64_t GpuModel::weight_bytes() const {
  return impl_->weights.bytes;
}
const WeightsLoadReport& GpuModel::weights_load_report() const {
  return impl_->weights.load;
}
uint64_t GpuModel::compute_bytes() const {
  return impl_->compute_bytes;
}
bool GpuModel::uses_q8_activations() const {
  const Impl& m = *impl_;
  for (const DeviceLayer& l : m.weights.layers)
    for (const DeviceTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (m.q8(*t, 1)) return true;
  return m.q8(m.weights.logits_matrix(), 1);
}

void GpuModel::bind_pages(const VkPageStore& pages) {
  const std::span<const PageChunk> chunks = pages.device_chunks();
  KVTRIE_CHECK(!chunks.empty() && chunks.size() <= kMaxPageChunks, "attention binds 1 to 4 device KV chunks");
  KVTRIE_CHECK(pages.layout().page_bytes() == impl_->layout.page_bytes(), "KV page layout mismatch");
  for (size_t c = 0; c + 1 < chunks.size(); ++c)
    KVTRIE_CHECK(
        chunks[c].page_count == chunks[0].page_count && chunks[c].page_begin == c * chunks[0].page_count,
        "device KV chunks must hold equal runs of pages (all but the last)");
  impl_->kv_chunks.assign(chunks.begin(), chunks.end());
}

void GpuModel::forward(const Batch& batch, std::vector<float>& logits) {
  Impl& m = *impl_;
  KVTRIE_CHECK(!m.kv_chunks.empty(), "bind_pages() before forward()");
  KVTRIE_CHECK(!batch.tokens.empty() && batch.tokens.size() <= m.options.max_batch_tokens,
               "batch size outside 1..max_batch_tokens");
  KVTRIE_CHECK(batch.logits_for.size() <= m.max_logits, "too many logits rows in one batch");
  KVTRIE_CHECK(batch.sequences() <= m.options.max_sequences, "too many sequences in one batch");
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
  // A step with no logits rows (a prompt chunk that is not the prompt's last) leaves an empty vector, whose
  // data() may be null: memcpy with a null pointer is undefined even for 0 bytes (UBSan reported it).
  if (n > 0) std::memcpy(logits.data(), m.logits_host.data(), n * sizeof(float));
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

uint64_t GpuModel::recordings_made() const {
  return impl_->recordings_made;
}

}  // namespace kvtrie::engine
