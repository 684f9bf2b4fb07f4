// Contract: GpuModel is the whole forward pass of one model on a Vulkan device. The constructor uploads
// every weight from the GgufFile into device-local buffers (split by rows where a tensor exceeds one
// binding), creates every pipeline and every activation buffer for the largest batch it accepts, so that
// forward() allocates nothing and creates no pipeline. KV lives in pages owned by the cache's VkPageStore
// (cache/vk_page_store.h), laid out as kv_layout() says; forward() writes each token's K and V into the
// slot the batch names and attends through per-sequence page tables, so one batch may hold tokens of many
// sequences (continuous batching). Only the logits rows the batch asks for are read back. Greedy steps may
// also go one ahead of the host (submit() / collect()): the next step is submitted while one runs, its
// tokens that step's argmax read on the device.
// With deterministic=true every matrix product and attention take batch-invariant paths
// (kernels/ops/matmul.h, attention.h), so a token's logits do not depend on the batch it ran in. Single owner
// thread (the engine's). The Context, GgufFile and the page store's buffers must outlive it.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/vk_page_store.h"
#include "kernels/ops/kv_layout.h"
#include "kernels/ops/matmul.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"
#include "runner/engine/batch_tokens.h"
#include "runner/engine/gpu_weights.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"

namespace kvtrie::engine {

// What kernels::l2_prefetch reads into the L2 cache beside a decode step's attention (a latency-bound level
// that leaves the device's read bandwidth idle): the o product's weights, and the first ffn_mib MiB of the
// gate and up products' (half each), with `groups` work groups (0: the kernel's default).
struct L2PrefetchPlan {
  bool o = false;
  uint32_t ffn_mib = 0;
  uint32_t groups = 0;
  bool any() const { return o || ffn_mib > 0; }
  bool operator==(const L2PrefetchPlan&) const = default;
};
enum class L2Prefetch { Auto, Off, Custom };

// The default plan for one-token decode steps of a layer whose o product has type `o` and whose gate and
// up products have type `gate_up` and gate_up_bytes together, 512 groups each: for Q4_0 products (device
// format Q4_0x8) with gate and up of 32 MiB or more, the o weights and 16 MiB; for Q8_0 products (Q8_0x8)
// with 64 MiB or more, the o weights alone; else nothing. On an H100 (docs/BENCHMARKS.md) llama3-8b Q4_0 at
// context 512 decoded 3-5% faster with its plan in 13 runs of 13 (session 23) and llama3-8b Q8_0 1.1% in 5
// of 5 (session 24), both as fast at 4096; Q4_K was as fast or lost 1-4% with every plan, the 16 MiB lost
// on Q8_0, and llama3-1b (19 MB of Q4_0 gate and up, 34 MiB of Q8_0) lost or moved within noise.
L2PrefetchPlan auto_l2_prefetch(TensorType o, TensorType gate_up, uint64_t gate_up_bytes);

// The matrix products of a layer, for per-product tuning knobs.
enum GpuProduct : uint8_t { kProductQkv, kProductO, kProductGateUp, kProductDown };

struct GpuModelOptions {
  // Tokens of one forward() at most (a prefill chunk and the decodes beside it).
  uint32_t max_batch_tokens = kDefaultBatchTokens;
  uint32_t max_sequences = 16;  // sequences of one forward() at most
  uint32_t max_context = 4096;  // positions per sequence at most
  uint32_t page_tokens = 16;    // P of the KV layout
  bool deterministic = false;   // batch-invariant kernels everywhere
  // Context positions per attention split of every batch; 0: the model's rules (gpu_model.cpp). A tuning
  // knob for kvtrie-bench.
  uint32_t attention_split = 0;
  // Decode steps' attention through attention_decode (kernels::AttentionArgs::decode) where the device runs
  // it; false: attention.comp, as batches take. A tuning knob for kvtrie-bench (--paged-decode).
  bool decode_attention = true;
  // attention_decode's lanes a key (kernels::AttentionArgs::decode_key_lanes): 1, 2 or 4; 0: by the split
  // size (kernels::attention_decode_key_lanes). A tuning knob for kvtrie-bench (--attention-key-lanes).
  uint32_t attention_key_lanes = 0;
  // Weights pulled into the L2 cache beside decode steps' attention: Auto, auto_l2_prefetch's plan for
  // one-token steps; Off; Custom, prefetch_plan for every decode step. Tuning knobs for kvtrie-bench
  // (--no-prefetch, --prefetch-o, --prefetch-ffn-mib, --prefetch-groups).
  L2Prefetch l2_prefetch = L2Prefetch::Auto;
  L2PrefetchPlan prefetch_plan;
  // One-token steps' logits product with this many rows a lane (kernels::MatvecQ8Args::rows_per_lane; 0: its
  // shape's). A tuning knob for kvtrie-bench (--logits-rows-per-lane).
  uint32_t logits_rows_per_lane = 0;
  // The logits through device memory and a copy to the host at the end of the step (before session 22),
  // instead of the output product writing them into host memory itself (a level and a 0.5 MB copy less a
  // step). A tuning knob for kvtrie-bench (--logits-copy).
  bool logits_copy = false;
  // forward() polls the step's fence for up to this long before it blocks (0: blocks at once, as before
  // session 22), so that a decode step is seen done as it completes rather than when a sleeping thread is
  // woken, at the price of a busy core meanwhile. A tuning knob for kvtrie-bench (--blocking-wait).
  uint32_t spin_wait_us = 20000;
  // The large products of prefill (kernels::coopmat2_wanted) through matmul's CoopMat2 path, x converted
  // to f16 first, where the device has VK_NV_cooperative_matrix2. Off by default: on an H100 it does not yet
  // outrun the CoopMat path in the whole forward pass (docs/BENCHMARKS.md). A tuning knob for kvtrie-bench.
  bool coopmat2 = false;
  // The tensor-core products of prefill read their x as f16 where matmul's CoopMat path takes it
  // (kernels::coopmat_takes_f16_x), x converted once for all the products that share it. A tuning knob for
  // kvtrie-bench (off: the tile converts x itself).
  bool f16_x = true;
  // Split-K for tensor-core products too small to fill the device (kernels/ops/matmul.h): 0 lets matmul
  // choose, 1 turns it off, N splits every such product N ways. A tuning knob for kvtrie-bench.
  uint32_t k_splits = 0;
  // Batches of up to this many tokens take matvec_q8 where the device has cooperative matrices (0: the
  // default, gpu_model_impl.h). A tuning knob for kvtrie-bench.
  uint32_t q8_max_tokens = 0;
  // The tiles of the tensor-core products that read x as f16, by GpuProduct (the logits take Q/K/V's);
  // unset: kernels::kF16XTile. A tuning knob for kvtrie-bench.
  std::array<std::optional<kernels::CoopmatTile>, 4> f16x_tiles{};
};

// One forward step. Token i belongs to sequence seq[i] (an index returned by add_sequence), sits at
// position positions[i] of it and writes its K/V to global slot page * P + offset (the page from that
// sequence's page table: slot = page_table(seq[i])[positions[i] / P] * P + positions[i] % P; the model
// computes it). Logits are returned for the tokens listed in logits_for, in that order.
// The sequences' page tables are stored end to end in one vector, so a Batch that is cleared and refilled
// every step keeps its storage: once its vectors have grown to the largest step, a step allocates nothing.
struct Batch {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> positions;
  std::vector<uint32_t> seq;
  std::vector<uint32_t> logits_for;   // token indices
  std::vector<uint32_t> pages;        // every sequence's device page ids, end to end
  std::vector<uint32_t> table_begin;  // where sequence s's table starts in pages (it ends at the next one's)
  // Every row of logits_for wants only its greedy token: the logits stay in device memory, forward() returns
  // none and greedy_tokens() has the rows' argmax (what Sampler's greedy picks from the same rows).
  bool greedy_only = false;
  // Nonzero (GpuModel::kTopCandidates or kWideTopCandidates): every row of logits_for wants only its best
  // that many logits (Sampler::sample_top): the logits stay in device memory, forward() returns none and
  // top_candidates() has each row's best ids and logits in rank order. Not with greedy_only (whose rows are
  // these rows' first).
  uint32_t top_candidates = 0;
  // GpuModel::submit() only: token t is the greedy token of logits row t of the step submitted before (still
  // in flight), read on the device; tokens holds placeholders (its size is the token count).
  bool fed = false;

  // Appends a sequence's page table (covering its positions); returns its index for seq[].
  uint32_t add_sequence(std::span<const uint32_t> table) {
    table_begin.push_back(static_cast<uint32_t>(pages.size()));
    pages.insert(pages.end(), table.begin(), table.end());
    return static_cast<uint32_t>(table_begin.size() - 1);
  }
  uint32_t sequences() const { return static_cast<uint32_t>(table_begin.size()); }
  std::span<const uint32_t> page_table(uint32_t s) const {
    const size_t end = s + 1 < table_begin.size() ? table_begin[s + 1] : pages.size();
    return std::span<const uint32_t>(pages).subspan(table_begin[s], end - table_begin[s]);
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    logits_for.clear();
    pages.clear();
    table_begin.clear();
    greedy_only = false;
    top_candidates = 0;
    fed = false;
  }
};

class GpuModel {
 public:
  GpuModel(vk::Context& context, const GgufFile& file, const ModelConfig& config,
           const GpuModelOptions& options);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  const ModelConfig& config() const;
  const GpuModelOptions& options() const;
  // The page layout this model writes and reads (page_tokens from the options).
  kernels::KvLayout kv_layout() const;
  // Attention reads the device KV tier through at most this many bindings.
  static constexpr size_t kMaxPageChunks = 4;
  // Binds the device tier's page chunks (call once, before the first forward()).
  void bind_pages(const VkPageStore& pages);
  // Bytes of device memory taken by weights and by activations/scratch (for the load-time log lines).
  uint64_t weight_bytes() const;
  const WeightsLoadReport& weights_load_report() const;  // what the weights' upload took
  // Whether decode steps and small batches multiply some weights with matvec_q8 (8-bit activations,
  // kernels/ops/matvec_q8.h), whose results differ from an f32 product by that rounding.
  bool uses_q8_activations() const;
  uint64_t compute_bytes() const;

  // Runs the batch; returns logits_for.size() rows of n_vocab floats, row-major, in host memory the model
  // owns (read in place, no copy: 0.5 MB a row for a 128K vocabulary), valid until the next forward().
  // A step is recorded once per shape (tokens, logits rows, attention splits, what it reads back) and
  // replayed while the shape repeats, as in steady decoding. With batch.greedy_only it reads back no logits
  // (an empty span) and greedy_tokens() has one id a row.
  std::span<const float> forward(const Batch& batch);
  // The last greedy_only step's tokens (forward() or collect()), one a logits_for row, valid until the next
  // forward() or submit().
  std::span<const int32_t> greedy_tokens() const;

  // Greedy steps one ahead of the host, as SGLang's overlap scheduler and vLLM's async scheduling run them:
  // submit() records and submits a greedy_only step and returns at once; collect() waits for the oldest step
  // in flight and returns its greedy tokens (greedy_tokens()). While one step is in flight the next may be
  // submitted with Batch::fed, its tokens that step's greedy tokens read on the device, so the device goes
  // from step to step while the caller's own work between steps (an engine's token handling, commits and
  // next batch) runs beside it. Each step's other inputs (positions, page tables) are the host's, written
  // into one of two sets while the step before reads the other. forward() needs no step in flight.
  static constexpr size_t kMaxInFlight = 2;
  void submit(const Batch& batch);
  std::span<const int32_t> collect();
  size_t in_flight() const;
  // The last top_candidates forward()'s best ids and logits of each logits_for row (per_row a row), row
  // after row, in rank order (the larger logit first, the lower id among equal ones, NaN as -inf); valid
  // until the next forward(). A step reads back kTopCandidates a row, or kWideTopCandidates when a row needs
  // more (sampling with penalties: top_k plus the penalty window, Sampler::top_entries_needed); the wider
  // merge costs more barrier stages, so steps that need only 64 take 64.
  static constexpr uint32_t kTopCandidates = 64;
  static constexpr uint32_t kWideTopCandidates = 128;
  struct TopCandidates {
    std::span<const int32_t> ids;
    std::span<const float> logits;
    uint32_t per_row = 0;
  };
  TopCandidates top_candidates() const;

  // Profiling (benchmarks): timestamps around every dispatch of the following steps, read back by
  // last_dispatch_times() after forward(). Turning it on or off drops the recorded steps.
  static constexpr uint32_t kProfileQueries = 8192;
  void set_profiling(bool on);
  std::vector<vk::DispatchTime> last_dispatch_times() const;
  // Span timing (benchmarks): a timestamp at the start and at the end of every following step (nothing
  // serialized), last_span_ms() after forward() the device's time on the step. Turning it on or off drops
  // the recorded steps.
  void set_span_timing(bool on);
  double last_span_ms() const;
  // Steps recorded so far (the rest were replays); for tests.
  uint64_t recordings_made() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtrie::engine
