#include "runner/engine/gpu_model.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>

#include "base/error.h"
#include "kernels/ops/argmax_rows.h"
#include "kernels/ops/top_k_rows.h"
#include "kernels/vk/device.h"
#include "runner/engine/gpu_model_impl.h"

namespace kvtrie::engine {

namespace {

// Shader-visible f32/int32 scratch of the largest batch.
vk::Buffer scratch(const vk::Device& device, uint64_t elements,
                   vk::MemoryKind kind = vk::MemoryKind::DeviceLocal) {
  return vk::Buffer(device, std::max<uint64_t>(elements, 4) * 4, kind);
}

}  // namespace

void GpuModel::Impl::allocate_activations() {
  const vk::Device& dev = context.device();
  const uint64_t T = options.max_batch_tokens;
  const uint64_t q_dim = uint64_t{config.n_heads} * config.head_dim_k;
  const uint64_t kv_dim = layout.kv_dim;
  max_logits = std::min(options.max_batch_tokens, std::max(options.max_sequences, 1u));
  if (options.deterministic && options.decode_attention) {
    kernels::AttentionArgs a;
    a.head_dim = config.head_dim_k;
    a.decode = true;
    position_splits = kernels::attention_uses_decode_pass(dev, a);
  }
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
  // head) for a decode step, or a block of deterministic_attention_tokens(); zero once here, and each merge
  // leaves them zero.
  const uint64_t counted = position_splits ? deterministic_attention_tokens() : kSmallBatch;
  split_counters = scratch(dev, std::min(T, counted) * config.n_heads);
  prefetch_sink = scratch(dev, 4);
  {
    vk::CommandRecorder zero(context);
    zero.begin();
    zero.fill(split_counters.view(), 0);
    zero.end();
    zero.submit_and_wait();
  }
  q_stride = static_cast<uint32_t>((std::max({uint64_t{config.n_embd}, q_dim, uint64_t{config.n_ff}}) + 15) /
                                   16 * 16);
  xq = kernels::QuantizedBuffers(dev, T, q_stride, true);
  hq = kernels::QuantizedBuffers(dev, T, q_stride, false);
  if (options.coopmat2 || (options.f16_x && kernels::coopmat_supported(dev)))
    x_f16 = vk::Buffer(dev, T * q_stride * 2 + 16, vk::MemoryKind::DeviceLocal);
  rows_x = scratch(dev, uint64_t{max_logits} * config.n_embd);
  rows_xn = scratch(dev, uint64_t{max_logits} * config.n_embd);
  logits_device = scratch(dev, uint64_t{max_logits} * config.n_vocab);
  norm_sums = scratch(dev, std::max<uint64_t>(T, max_logits));
  const auto host = vk::MemoryKind::HostWritten;  // read by shaders every layer
  const uint64_t pages_per_seq = (options.max_context + options.page_tokens - 1) / options.page_tokens;
  for (StepIo& set : io) {
    set.ids = scratch(dev, T, host);
    set.positions = scratch(dev, T, host);
    set.slots = scratch(dev, T, host);
    set.token_info = scratch(dev, 2 * T, host);
    set.page_table = scratch(dev, uint64_t{options.max_sequences} * pages_per_seq, host);
    set.logits_index = scratch(dev, max_logits, host);
    set.argmax_host = scratch(dev, max_logits, vk::MemoryKind::HostCached);
  }
  logits_host = scratch(dev, uint64_t{max_logits} * config.n_vocab, vk::MemoryKind::HostCached);
  argmax_scratch = scratch(dev, kernels::argmax_rows_scratch_bytes(max_logits, config.n_vocab) / 4);
  if (config.n_vocab >= kTopCandidates) {
    const uint32_t most = std::min(config.n_vocab, kWideTopCandidates);
    top_ids_host = scratch(dev, uint64_t{max_logits} * most, vk::MemoryKind::HostCached);
    top_logits_host = scratch(dev, uint64_t{max_logits} * most, vk::MemoryKind::HostCached);
    top_scratch = scratch(dev, kernels::top_k_rows_scratch_bytes(max_logits, config.n_vocab, most) / 4);
  }
  for (const vk::Buffer* b : {&x, &xn, &qkv, &attn, &gate, &up, &tmp, &attn_scratch, &rows_x, &rows_xn,
                              &logits_device, &x_f16, &split_scratch, &split_counters, &norm_sums})
    compute_bytes += b->size();
}

uint32_t GpuModel::Impl::split_size(uint32_t tokens, uint32_t max_position, bool decode) const {
  if (options.attention_split) return options.attention_split;
  if (options.deterministic) return position_splits ? 0 : kDeterministicSplit;
  if (tokens > kSmallBatch) {
    const uint32_t splits = (kPrefillSplitTokens + tokens - 1) / tokens;
    return std::max(kLargeBatchSplit, std::bit_ceil((max_position + splits) / splits));
  }
  const uint32_t splits = std::max(kSmallBatch / tokens, 4u);
  const uint32_t split =
      std::clamp<uint32_t>(std::bit_floor(std::max<uint32_t>(max_position / splits, 1)), 32, 512);
  if (!decode) return split;
  // attention_decode: a split per 8th of all the step's positions (8 to 16 splits), 128 to 512 (never fewer
  // than the rule above, so that its splits fit the scratch that rule sizes): the split of a token at
  // position tokens x max_position, kernels::attention_position_split, which --deterministic gives every
  // token by its own position (so one sequence decodes alike under both). On an H100, llama3-8b Q4_0
  // decode, tok/s with a 16th against an 8th (session 16): one sequence at 2048 308 / 309 against 331 /
  // 338, at 4096 291 / 298 against 309 / 307, at 1024 equal; 4 sequences at 1500 682 against 707; 8 at 512
  // 879 / 885 against 901 / 896; llama3-1b at 2048 883 / 900 against 975 / 950. (sweep-attention alone,
  // without the layer's products around it, had one sequence at 4096 fastest at a 16th.)
  const auto step_positions =
      static_cast<uint32_t>(std::min<uint64_t>(uint64_t{max_position} * tokens, UINT32_MAX));
  return std::max(split, kernels::attention_position_split(step_positions));
}

vk::CommandRecorder& GpuModel::Impl::recording_for(uint32_t T, uint32_t L, uint32_t max_position,
                                                   LogitsOut out) {
  const uint32_t split = split_size(T, max_position, decode_step);
  const uint32_t splits = kernels::attention_max_splits(max_position, split);
  ++steps;
  for (Recording& r : recordings)
    if (r.tokens == T && r.logits == L && r.split == split && r.splits == splits && r.decode == decode_step &&
        r.out == out && r.set == io_set && r.fed == fed) {
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
  *slot = {T, L, split, splits, decode_step, out, io_set, fed, steps, std::move(slot->recorder)};
  slot->recorder->set_profiling(profile_pool.get());
  slot->recorder->set_span_timing(span_pool.get());
  rec = slot->recorder.get();
  record(T, L, max_position, out);
  ++recordings_made;
  return *slot->recorder;
}

void GpuModel::Impl::write_inputs(const Batch& batch, uint32_t& max_position) {
  const auto T = batch.tokens.size();
  const StepIo& in = step_io();
  auto* id = static_cast<int32_t*>(in.ids.data());
  auto* pos = static_cast<int32_t*>(in.positions.data());
  auto* slot = static_cast<int32_t*>(in.slots.data());
  auto* info = static_cast<uint32_t*>(in.token_info.data());
  auto* table = static_cast<uint32_t*>(in.page_table.data());
  auto* index = static_cast<uint32_t*>(in.logits_index.data());
  // The tables go to the device as they lie in the batch: sequence s's starts at table_begin[s].
  KVTRIE_CHECK(batch.pages.size() <= in.page_table.size() / 4, "page tables exceed the batch's capacity");
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
    if (!fed) id[t] = batch.tokens[t];
    pos[t] = static_cast<int32_t>(p);
    slot[t] = static_cast<int32_t>(pages_of_s[p / P] * P + p % P);
    info[2 * t] = batch.table_begin[s];
    info[2 * t + 1] = p;
    max_position = std::max(max_position, p);
  }
  for (size_t i = 0; i < batch.logits_for.size(); ++i) index[i] = batch.logits_for[i];
}

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

LogitsOut GpuModel::Impl::submit_step(const Batch& batch, uint32_t set) {
  KVTRIE_CHECK(!kv_chunks.empty(), "bind_pages() before forward()");
  KVTRIE_CHECK(!batch.tokens.empty() && batch.tokens.size() <= options.max_batch_tokens,
               "batch size outside 1..max_batch_tokens");
  KVTRIE_CHECK(batch.logits_for.size() <= max_logits, "too many logits rows in one batch");
  KVTRIE_CHECK(batch.sequences() <= options.max_sequences, "too many sequences in one batch");
  if (batch.fed) {
    KVTRIE_CHECK(!in_flight.empty() && in_flight.back().out == LogitsOut::Argmax &&
                     in_flight.back().rows == batch.tokens.size(),
                 "a fed step follows a greedy step in flight with a logits row for each of its tokens");
  } else {
    for (int32_t t : batch.tokens)
      KVTRIE_CHECK(t >= 0 && static_cast<uint32_t>(t) < config.n_vocab, "token id outside the vocabulary");
  }
  KVTRIE_CHECK(!(batch.greedy_only && batch.top_candidates),
               "a batch reads argmax or top candidates, not both");
  KVTRIE_CHECK(batch.top_candidates == 0 || batch.top_candidates == kTopCandidates ||
                   batch.top_candidates == kWideTopCandidates,
               "top candidates are kTopCandidates or kWideTopCandidates a row");
  KVTRIE_CHECK(batch.top_candidates <= config.n_vocab, "more top candidates than the vocabulary");
  io_set = set;
  fed = batch.fed;
  uint32_t max_position = 0;
  write_inputs(batch, max_position);
  const LogitsOut out = batch.logits_for.empty()                     ? LogitsOut::Rows
                        : batch.greedy_only                          ? LogitsOut::Argmax
                        : batch.top_candidates == kWideTopCandidates ? LogitsOut::TopWide
                        : batch.top_candidates != 0                  ? LogitsOut::Top
                                                                     : LogitsOut::Rows;
  vk::CommandRecorder& step =
      recording_for(static_cast<uint32_t>(batch.tokens.size()),
                    static_cast<uint32_t>(batch.logits_for.size()), max_position, out);
  step.submit();
  in_flight.push_back({&step, set, out, static_cast<uint32_t>(batch.logits_for.size())});
  return out;
}

void GpuModel::Impl::collect_step() {
  const InFlight done = in_flight.front();
  in_flight.erase(in_flight.begin());
  done.step->wait_spinning(std::chrono::microseconds(options.spin_wait_us));
  rec = done.step;
  greedy_rows = done.out == LogitsOut::Argmax ? done.rows : 0;
  greedy_set = done.set;
  top_rows = done.out == LogitsOut::Top || done.out == LogitsOut::TopWide ? done.rows : 0;
  if (done.out == LogitsOut::Argmax) io[done.set].argmax_host.invalidate();
}

std::span<const float> GpuModel::forward(const Batch& batch) {
  Impl& m = *impl_;
  KVTRIE_CHECK(m.in_flight.empty(), "forward() with steps in flight: collect() them first");
  KVTRIE_CHECK(!batch.fed, "a fed step goes through submit()");
  const LogitsOut out = m.submit_step(batch, 0);
  m.collect_step();
  m.top_per_row = batch.top_candidates;
  if (out == LogitsOut::Argmax) return {};
  if (out == LogitsOut::Top || out == LogitsOut::TopWide) {
    m.top_ids_host.invalidate();
    m.top_logits_host.invalidate();
    return {};
  }
  m.logits_host.invalidate();
  return {static_cast<const float*>(m.logits_host.data()), batch.logits_for.size() * m.config.n_vocab};
}

void GpuModel::submit(const Batch& batch) {
  Impl& m = *impl_;
  KVTRIE_CHECK(batch.greedy_only && !batch.logits_for.empty(), "submit() takes greedy steps");
  KVTRIE_CHECK(m.in_flight.size() < kMaxInFlight, "submit() with kMaxInFlight steps in flight");
  m.submit_step(batch, m.in_flight.empty() ? 0 : 1 - m.in_flight.back().set);
}

std::span<const int32_t> GpuModel::collect() {
  Impl& m = *impl_;
  KVTRIE_CHECK(!m.in_flight.empty(), "collect() with no step in flight");
  m.collect_step();
  return greedy_tokens();
}

size_t GpuModel::in_flight() const {
  return impl_->in_flight.size();
}

std::span<const int32_t> GpuModel::greedy_tokens() const {
  const Impl& m = *impl_;
  return {static_cast<const int32_t*>(m.io[m.greedy_set].argmax_host.data()), m.greedy_rows};
}

GpuModel::TopCandidates GpuModel::top_candidates() const {
  const Impl& m = *impl_;
  if (m.top_rows == 0) return {};
  const size_t n = m.top_rows * m.top_per_row;
  return {{static_cast<const int32_t*>(m.top_ids_host.data()), n},
          {static_cast<const float*>(m.top_logits_host.data()), n},
          m.top_per_row};
}

}  // namespace kvtrie::engine

namespace kvtrie::engine {

void GpuModel::set_profiling(bool on) {
  Impl& m = *impl_;
  m.recordings.clear();  // re-record with or without timestamps
  m.profile_pool = on ? std::make_unique<vk::QueryPool>(m.context.device(), kProfileQueries) : nullptr;
}

void GpuModel::set_span_timing(bool on) {
  Impl& m = *impl_;
  m.recordings.clear();  // re-record with or without the timestamps
  m.span_pool = on ? std::make_unique<vk::QueryPool>(m.context.device(), 2) : nullptr;
}

double GpuModel::last_span_ms() const {
  return impl_->rec ? impl_->rec->span_ns() / 1e6 : 0;
}

std::vector<vk::DispatchTime> GpuModel::last_dispatch_times() const {
  return impl_->rec ? impl_->rec->dispatch_times() : std::vector<vk::DispatchTime>{};
}

uint64_t GpuModel::recordings_made() const {
  return impl_->recordings_made;
}

}  // namespace kvtrie::engine
