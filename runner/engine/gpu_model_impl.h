// Contract: GpuModel::Impl, the state of a GpuModel and the functions that record its steps; private to
// runner/engine (gpu_model.cpp: set-up, the recordings, a step's inputs and the public functions;
// gpu_model_step.cpp: what a step records, layer by layer and product by product). Not thread-safe: the
// GpuModel's owner thread.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/ops/attention.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/kv_layout.h"
#include "kernels/ops/matmul.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/ops/quantized_x.h"
#include "kernels/ops/rms_norm.h"
#include "kernels/ops/rope.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/query_pool.h"
#include "runner/engine/gpu_model.h"
#include "runner/engine/gpu_weights.h"

namespace kvtrie::engine {

// What a step reads back of its logits rows (Batch::greedy_only, Batch::top_candidates).
// Top: kTopCandidates a row; TopWide: kWideTopCandidates.
enum class LogitsOut : uint8_t { Rows, Argmax, Top, TopWide };

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
  vk::Buffer norm_sums;      // a float a token: a batch's fused normed products (matvec_fused's norm_sums)
  vk::Buffer split_scratch;  // split-K partial outputs of tensor-core products (empty: no split-K)
  // A step's inputs written by the host (host-visible, read by shaders directly: a few KiB per step) and its
  // greedy tokens read back. Two sets: the host writes a step's into one while the step before, submitted
  // ahead (GpuModel::submit), runs on the other, and a fed step reads its token ids from the other's argmax.
  struct StepIo {
    vk::Buffer ids, positions, slots, token_info, page_table, logits_index;
    vk::Buffer argmax_host;  // a greedy step's one id a logits row (Batch::greedy_only)
  };
  std::array<StepIo, 2> io;
  uint32_t io_set = 0;  // the set of the step being written and recorded
  bool fed = false;     // the step being written and recorded takes its token ids from the other set's argmax
  const StepIo& step_io() const { return io[io_set]; }
  // Submitted steps not collected yet, oldest first (at most kMaxInFlight).
  struct InFlight {
    vk::CommandRecorder* step = nullptr;
    uint32_t set = 0;
    LogitsOut out = LogitsOut::Rows;
    uint32_t rows = 0;  // logits rows
  };
  std::vector<InFlight> in_flight;
  vk::Buffer prefetch_sink;  // l2_prefetch's never-written 16 bytes
  vk::Buffer logits_host;
  vk::Buffer argmax_scratch;  // argmax_rows' chunk bests
  size_t greedy_rows = 0;     // rows of greedy tokens the last collected step wrote ...
  uint32_t greedy_set = 0;    // ... into this set's argmax_host
  // A top-candidates step's best ids and logits a row (Batch::top_candidates, up to kWideTopCandidates).
  vk::Buffer top_ids_host, top_logits_host, top_scratch;
  size_t top_rows = 0;       // rows of top_*_host the last forward() wrote
  uint32_t top_per_row = 0;  // ... and their entries a row
  uint32_t max_logits = 0;
  uint64_t compute_bytes = 0;
  std::vector<PageChunk> kv_chunks;  // the device tier: attention binds up to 4 chunks of equal size
  // Recorded steps, replayed while the batch shape repeats (decode): a recording depends only on the
  // token count, the logits rows and the attention split count; every per-step input is read from
  // host-visible buffers at execution. Least recently used one is re-recorded on a miss.
  struct Recording {
    uint32_t tokens = 0, logits = 0, split = 0, splits = 0;  // splits of `split` attention positions
    bool decode = false;                                     // attention's decode pass (decode_step)
    LogitsOut out = LogitsOut::Rows;                         // how the step ends
    uint32_t set = 0;                                        // its inputs' set (io_set)
    bool fed = false;                                        // its token ids from the other set's argmax
    uint64_t last_use = 0;
    std::unique_ptr<vk::CommandRecorder> recorder;
  };
  static constexpr size_t kMaxRecordings = 10;
  std::vector<Recording> recordings;
  uint64_t steps = 0, recordings_made = 0;
  vk::CommandRecorder* rec = nullptr;  // the recording being made
  bool decode_step = false;            // this step's tokens are each alone in their sequence (write_inputs)
  // --deterministic's attention: the decode pass with each token's own splits (AttentionArgs::split_size
  // 0, batch-invariant) where the device and head_dim allow it and decode_attention is on; else
  // attention.comp in splits of kDeterministicSplit.
  bool position_splits = false;
  std::unique_ptr<vk::QueryPool> profile_pool;
  std::unique_ptr<vk::QueryPool> span_pool;  // set_span_timing

  // `weight_types`: the prewarm creates the pipelines of these types only (Kernels' contract).
  Impl(vk::Context& ctx, const ModelConfig& mc, const GpuModelOptions& opts,
       std::span<const TensorType> weight_types)
      : context(ctx),
        config(mc),
        options(opts),
        kernels(ctx, weight_types),
        layout{mc.n_layers, opts.page_tokens, mc.n_kv_heads * mc.head_dim_k},
        path(opts.deterministic ? kernels::MatmulPath::Deterministic : kernels::MatmulPath::Auto) {}

  void allocate_activations();

  kernels::MatmulArgs product(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out,
                              uint32_t tokens, GpuProduct which = kProductQkv) const;
  // converted: the producer of `in` also wrote it as f16 into x_f16 (takes_f16_x said it would be read so).
  void matmul(const DeviceTensor& w, const vk::Buffer& in, const vk::Buffer& out, uint32_t tokens,
              GpuProduct which = kProductQkv, bool converted = false);
  // Whether the product reads its x as f16 from x_f16 (CoopMat2 with options.coopmat2, else CoopMat with
  // options.f16_x), and through which path request.
  std::optional<kernels::MatmulPath> f16_x_path(const kernels::MatmulArgs& a) const;
  bool takes_f16_x(const kernels::MatmulArgs& a) const { return f16_x_path(a).has_value(); }
  // Sets a.x_f16 where the product reads x as f16, converting a.x into x_f16 first unless `converted` says
  // an earlier product of the same x, or x's producer, did. Returns the path to request.
  kernels::MatmulPath give_f16_x(kernels::MatmulArgs& a, bool& converted);

  // out = rms_norm(x) * weight over `rows` rows of n_embd.
  kernels::RmsNormArgs norm_args(const vk::Buffer& x_in, const DeviceTensor& weight, const vk::Buffer& out,
                                 uint32_t rows) const;
  // half_out: out as f16 (the products' x_f16).
  void rms_norm(const vk::Buffer& x_in, const DeviceTensor& weight, const vk::Buffer& out, uint32_t rows,
                bool half_out = false);
  // x += residual (in place), then out = rms_norm(x) * weight.
  void add_rms_norm(const vk::Buffer& x_inout, const vk::Buffer& residual, const DeviceTensor& weight,
                    const vk::Buffer& out, uint32_t rows, bool half_out = false);
  // Per-head norm in place (qwen3 q/k norm): tokens * heads rows of head_dim, tokens qkv_stride apart.
  void head_norm(vk::BufferView buf, const DeviceTensor& weight, uint32_t tokens, uint32_t heads);

  // Rope of the heads of q or k inside qkv (tokens qkv_stride apart).
  kernels::RopeArgs rope_args(vk::BufferView buf, uint32_t tokens, uint32_t heads) const;
  void rope(vk::BufferView buf, uint32_t tokens, uint32_t heads);

  // The token embeddings into out; with a norm also normed and quantized into normed_q() (xq_norm = norm),
  // so that the first layer's products need no quantize pass.
  void embed(const vk::Buffer& index, const DeviceTensor& table, const vk::Buffer& out, uint32_t tokens,
             const DeviceTensor* norm);

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
  // but not below kLargeBatchSplit positions. --deterministic (a token's result must not depend on its
  // batch) splits each token by its own position through the decode pass (position_splits: split_size 0),
  // the split a decode step of one sequence takes by default: on an H100 (session 20) llama3-8b Q4_0 decode
  // 0-1% / 1% / 1-4% below the default at 512 / 2048 / 4096, against 9-17% below for attention.comp in splits
  // of 64 (its fallback, kDeterministicSplit: 128 was 15-18% / 15% / 8-9% below in session 17), and its
  // prefill of 4096 tokens equal to that fallback's (llama3-1b 7% slower).
  static constexpr uint32_t kSmallBatch = 32, kLargeBatchSplit = 1024, kDeterministicSplit = 64;
  // Tokens of one attention dispatch under --deterministic (attention_in_blocks): its partials take tokens x
  // heads x splits of the longest context, so blocks keep them within kDeterministicScratchBytes (16 to 256
  // tokens. llama3-8b: 256 at a context of 8,192 with the decode pass's own splits, 16 at most there;
  // with attention.comp's splits of 64, 112 at 4096, 121 MB, and 16 at 32768, 137 MB).
  static constexpr uint64_t kDeterministicScratchBytes = 128ull << 20;
  static constexpr uint32_t kDeterministicMinTokens = 16, kDeterministicMaxTokens = 256;
  static constexpr uint32_t kPrefillSplitTokens = 512;
  uint32_t split_size(uint32_t tokens, uint32_t max_position, bool decode = false) const;
  // What l2_prefetch reads beside this layer's attention in a step of T tokens (options.l2_prefetch).
  L2PrefetchPlan l2_prefetch_plan(const DeviceLayer& w, uint32_t T) const;
  // Records l2_prefetch of the layer's next products' weights, as the plan says, beside attention.
  void l2_prefetch_after_attention(const DeviceLayer& w, const L2PrefetchPlan& plan);

  // The recording for this shape: replayed when one exists, else made in the least recently used slot.
  vk::CommandRecorder& recording_for(uint32_t T, uint32_t L, uint32_t max_position, LogitsOut out);

  // The decode step, batches of up to kQ8Tokens tokens (kQ8TokensNoCoopmat without cooperative matrices:
  // bigger batches are faster on tensor cores, kernels/ops/matmul.h) and every product under
  // --deterministic take matvec_q8 where the weights allow: it folds the norm before a product, the
  // residual add after it and the FFN's SwiGLU, and it is batch-invariant.
  static constexpr uint32_t kQ8Tokens = 16, kQ8TokensNoCoopmat = 32;
  bool q8(const DeviceTensor& w, uint32_t T) const;
  kernels::MatvecQ8Args q8_args(const DeviceTensor& w, const kernels::QuantizedX& in, vk::BufferView out,
                                uint32_t T, uint32_t y_stride = 0) const;
  // Where matvec_q8 finds its inputs quantized: the normed residual stream, and a hidden vector.
  kernels::QuantizedX normed_q() const { return xq.view(); }
  kernels::QuantizedX hidden_q() const { return hq.view(); }
  // A product input quantized once (rms_norm(in) * norm into normed_q() when a norm is given, else into
  // hidden_q()) for every matvec_q8 product that reads it: a dispatch and a barrier of its own, but the
  // products then need no x work and run in small work groups (kernels/ops/matvec_q8.h).
  kernels::QuantizedX quantize_input(const vk::Buffer& in, uint32_t cols, const DeviceTensor* norm,
                                     uint32_t T);

  // Adds a pending product output into the residual stream.
  void settle_residual(uint32_t T);
  // xn = rms_norm(x) * weight (half: into x_f16 as f16 instead), settling a pending residual in the same
  // dispatch.
  void norm_into_xn(const DeviceTensor& weight, uint32_t T, bool half = false);
  // The columns [col, col + w.rows) of out (a token every out_stride floats) = w . rms_norm(x) * norm,
  // for each (w, col); the norm is folded into the products where they all take matvec_q8.
  // With to_pages (one part, on matvec_q8): the product also rotates Q and stores K and V in the pages.
  void normed_products(GpuProduct which, const DeviceTensor& norm,
                       std::initializer_list<std::pair<const DeviceTensor*, uint32_t>> parts,
                       const vk::Buffer& out, uint32_t out_stride, uint32_t T,
                       const kernels::QkvToPages* to_pages = nullptr);
  // x += w . in: folded into the product by matvec_q8 (on `quantized` when the product before wrote `in`
  // quantized, else quantized here), else the product goes to tmp, added later. The decode step's product
  // also writes the new x quantized and normed by next_norm (the norm of the product after it, when that
  // one takes matvec_q8) into xq: a quantize dispatch and a barrier level fewer (64 a step in llama3-8b).
  // converted: in's producer wrote it as f16 into x_f16 (half_out_for said the product reads it so).
  void residual_product(GpuProduct which, const DeviceTensor& w, const vk::Buffer& in, uint32_t T,
                        const std::optional<kernels::QuantizedX>& quantized, const DeviceTensor* next_norm,
                        bool converted = false);
  // Products of float weights that fold the norm before them, the residual add after them and the FFN's
  // SwiGLU (kernels::matvec_fused: a dispatch and a barrier level each fewer): the decode step's, and under
  // --deterministic every step's, so that a token gets the same bits alone and in a batch (the fused builds
  // agree among themselves, not with the unfused steps).
  bool fused(const DeviceTensor& w, uint32_t T) const;
  // out = w . rms_norm(in) * norm for T tokens of in (x, or rows_x), out_stride floats a token (fused(w, T));
  // swiglu: w is [gate; up], combined as stored.
  void fused_normed_product(const DeviceTensor& w, const DeviceTensor& norm, vk::BufferView out, uint32_t T,
                            uint32_t out_stride, bool swiglu = false, const vk::Buffer* in = nullptr);
  // Whether residual_product's matmul of w over in will read in as f16: its producer then writes it so.
  bool half_out_for(const DeviceTensor& w, const vk::Buffer& in, uint32_t T, GpuProduct which) const;
  // The norm before the products that read x next, when they take matvec_q8 (residual_product's
  // next_norm): the FFN's after attention, the next layer's attention's (or the output norm's) after it.
  const DeviceTensor* ffn_norm_if_q8(const DeviceLayer& w, uint32_t T) const;
  const DeviceTensor* norm_after_layer_if_q8(uint32_t l, uint32_t T) const;
  // Layer l's attention norm when its Q/K/V products take matvec_q8.
  const DeviceTensor* attn_norm_if_q8(uint32_t l, uint32_t T) const;

  // What comes between the Q/K/V products and attention when the product does not do it: biases, head
  // norms and rope, then K and V into the pages of each chunk.
  void store_kv(const DeviceLayer& w, uint32_t l, uint32_t T, vk::BufferView q, vk::BufferView k,
                vk::BufferView v, const kernels::RopeArgs& k_rope, const kernels::RopeArgs& q_rope);

  void attention_block(const DeviceLayer& w, uint32_t l, uint32_t T, uint32_t max_position);

  // Attention for a.tokens tokens, in blocks of deterministic_attention_tokens() under --deterministic: its
  // fixed split size makes partials for every split of every token, a scratch that grows with the context,
  // and a token's work does not depend on its block, so blocks give the same bits.
  void attention_in_blocks(const kernels::AttentionArgs& a);
  // Tokens of one attention dispatch under --deterministic (all of them otherwise): as many as keep the
  // partials of a step at the longest context within kDeterministicScratchBytes, a multiple of 16.
  uint32_t deterministic_attention_tokens() const;

  void ffn_block(const DeviceLayer& w, uint32_t l, uint32_t T);

  void record(uint32_t T, uint32_t L, uint32_t max_position, LogitsOut read_back);
  // The recording's end: Argmax, each of the step's L logits rows' argmax into argmax_host; Top, each row's
  // kTopCandidates best into top_*_host; Rows, the rows copied to the host first unless they were written
  // there.
  void finish_logits(uint32_t L, bool in_host_memory, LogitsOut read_back);

  // Writes the batch's inputs into io[io_set] (the token ids unless fed).
  void write_inputs(const Batch& batch, uint32_t& max_position);
  // Checks the batch, writes its inputs into io[set] and submits its step; returns what it reads back.
  LogitsOut submit_step(const Batch& batch, uint32_t set);
  // Waits for the oldest step in flight and makes what it read back readable by the host.
  void collect_step();
};

}  // namespace kvtrie::engine
