// load, prefill and decode: the forward pass alone (GpuModel driven directly with a bench-owned page
// allocator: sequence s owns device pages [s * pages_per_seq, (s + 1) * pages_per_seq)), and load to ready
// through GpuEngine.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "cache/vk_page_store.h"
#include "kernels/vk/context.h"
#include "kernels/vk/pipeline_statistics.h"
#include "kernels/vk/shader_registry.h"
#include "runner/engine/gpu_engine.h"
#include "runner/engine/gpu_model.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::bench {

using engine::Batch;
using engine::GpuModel;
using engine::GpuModelOptions;
using Clock = std::chrono::steady_clock;

namespace {

// The model, its page store and the bench's page tables, set up for `sequences` sequences of at most
// `max_context` positions.
struct ModelRig {
  GgufFile file;
  ModelConfig config;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<VkPageStore> pages;
  uint32_t pages_per_seq = 0;

  // `mo` carries the tuning knobs (deterministic, attention_split, coopmat2); the sizes come from the rest.
  ModelRig(vk::Context& ctx, const std::filesystem::path& path, uint32_t sequences, uint32_t max_context,
           uint32_t max_batch_tokens, GpuModelOptions mo)
      : file(GgufFile::open(path)), config(ModelConfig::from_gguf(file)) {
    mo.max_batch_tokens = std::max(max_batch_tokens, sequences);
    mo.max_sequences = sequences;
    mo.max_context = max_context;
    model = std::make_unique<GpuModel>(ctx, file, config, mo);
    const kernels::KvLayout layout = model->kv_layout();
    pages_per_seq = (max_context + layout.page_tokens - 1) / layout.page_tokens;
    const uint64_t total = uint64_t{pages_per_seq} * sequences;
    // VkPageStore cuts the pages into chunks of one binding each, and GpuModel binds up to kMaxPageChunks.
    const uint64_t most =
        layout.pages_per_binding(ctx.device().max_storage_buffer_range()) * GpuModel::kMaxPageChunks;
    KVTRIE_CHECK(total <= most, "the KV pages (" + std::to_string(total) + ") exceed GpuModel's " +
                                    std::to_string(GpuModel::kMaxPageChunks) + " storage-buffer bindings (" +
                                    std::to_string(most) + " pages): fewer sequences or a shorter context");
    pages = std::make_unique<VkPageStore>(ctx, layout, static_cast<uint32_t>(total), 0);
    model->bind_pages(*pages);
  }

  std::vector<uint32_t> page_table(uint32_t seq) const {
    std::vector<uint32_t> t(pages_per_seq);
    for (uint32_t i = 0; i < pages_per_seq; ++i) t[i] = seq * pages_per_seq + i;
    return t;
  }

  // Prefills `tokens` into sequence `seq` from position 0 in chunks; logits only for the last token.
  void prefill(uint32_t seq, const std::vector<int32_t>& tokens) {
    const uint32_t chunk = model->options().max_batch_tokens;
    Batch batch;
    for (uint32_t begin = 0; begin < tokens.size(); begin += chunk) {
      const auto end = static_cast<uint32_t>(std::min<size_t>(tokens.size(), begin + chunk));
      batch.clear();
      batch.add_sequence(page_table(seq));
      for (uint32_t p = begin; p < end; ++p) {
        batch.tokens.push_back(tokens[p]);
        batch.positions.push_back(p);
        batch.seq.push_back(0);
      }
      batch.logits_for.push_back(end - begin - 1);
      model->forward(batch);
    }
  }
};

}  // namespace

void run_load(const CommonOptions& common, const LoadOptions& options) {
  // A fresh Context per repeat (created outside the timing): the Context's pipeline cache would otherwise
  // make every load after the first skip pipeline creation.
  std::vector<double> seconds, context_seconds;
  uint64_t weights = 0;
  std::string device;
  for (uint32_t i = 0; i < common.warmup + common.repeats; ++i) {
    const auto context_start = Clock::now();
    vk::Context ctx(context_options(common));
    const double context_s = seconds_since(context_start);
    device = ctx.device().info().name;
    const auto start = Clock::now();
    const GgufFile file = GgufFile::open(options.model);
    const auto tokenizer = Tokenizer::from_gguf(file);
    engine::GpuEngineConfig config;
    config.parallel = 1;
    config.n_ctx = std::min<uint32_t>(4096, ModelConfig::from_gguf(file).n_ctx_train);
    engine::GpuEngine eng(ctx, file, *tokenizer, config);
    const double s = seconds_since(start);
    weights = eng.memory_use().weights;
    eng.shutdown(std::chrono::milliseconds(0));
    if (i >= common.warmup) {
      seconds.push_back(s);
      context_seconds.push_back(context_s);
    }
  }
  Row("load")
      .text("model", model_label(options.model))
      .text("device", device)
      .num("load_s", median(seconds))
      .num("first_load_s", seconds.empty() ? 0 : seconds.front())
      .num("context_s", median(context_seconds))
      .integer("weight_bytes", static_cast<int64_t>(weights))
      .integer("repeats", common.repeats)
      .emit();
}

namespace {

// Emits a <bench>_profile row per pipeline (time summed over its dispatches in one step, from the
// recorder's timestamps) and a total row comparing the summed GPU time with `wall_seconds`, the unprofiled
// wall time of that step (the difference is host work and submission latency; timestamps also serialize
// dispatches, so the sum is an upper bound).
void emit_profile(const std::string& bench, const std::string& model, const std::string& key, int64_t value,
                  const std::vector<vk::DispatchTime>& times, double wall_seconds) {
  std::vector<std::pair<std::string, std::pair<double, int>>> by_op;
  double total_ns = 0;
  for (const vk::DispatchTime& t : times) {
    total_ns += t.ns;
    auto it = std::find_if(by_op.begin(), by_op.end(), [&](const auto& e) { return e.first == *t.name; });
    if (it == by_op.end()) it = by_op.insert(by_op.end(), {*t.name, {0.0, 0}});
    it->second.first += t.ns;
    ++it->second.second;
  }
  std::sort(by_op.begin(), by_op.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  for (const auto& [name, v] : by_op)
    Row(bench + "_profile")
        .text("model", model)
        .integer(key, value)
        .text("op", name)
        .integer("dispatches", v.second)
        .num("ms", v.first / 1e6)
        .num("share", v.first / total_ns)
        .emit();
  Row(bench + "_profile")
      .text("model", model)
      .integer(key, value)
      .text("op", "total")
      .integer("dispatches", static_cast<int64_t>(times.size()))
      .num("gpu_ms", total_ns / 1e6)
      .num("wall_ms", wall_seconds * 1e3)
      .emit();
}

}  // namespace

void run_prefill(const CommonOptions& common, const PrefillOptions& options) {
  vk::Context ctx(context_options(common));
  GpuModelOptions knobs;
  knobs.deterministic = options.deterministic;
  knobs.attention_split = options.attention_split;
  knobs.coopmat2 = options.coopmat2;
  knobs.f16_x = !options.f32_x;
  knobs.k_splits = options.k_splits;
  knobs.decode_attention = !options.paged_decode;
  for (const std::string& item : split_list(options.tiles)) {
    const size_t eq = item.find('=');
    const kernels::CoopmatTile tile =
        parse_coopmat_tile(eq == std::string::npos ? item : item.substr(eq + 1));
    const std::string which = eq == std::string::npos ? "all" : item.substr(0, eq);
    using engine::GpuProduct;
    constexpr std::pair<std::string_view, GpuProduct> kNames[] = {{"qkv", engine::kProductQkv},
                                                                  {"o", engine::kProductO},
                                                                  {"gate_up", engine::kProductGateUp},
                                                                  {"down", engine::kProductDown}};
    bool known = which == "all";
    for (const auto& [name, product] : kNames)
      if (which == "all" || which == name) {
        knobs.f16x_tiles[product] = tile;
        known = true;
      }
    if (!known) throw InputError("prefill --tiles: a product is qkv, o, gate_up or down; got " + which);
  }
  ModelRig rig(ctx, options.model, 1, options.prompt, options.max_batch_tokens, knobs);
  const auto prompt = pseudo_random_tokens(options.prompt, 11, rig.config.n_vocab);
  // forward() waits for the GPU and reads the logits back.
  const double med = median_seconds(common, [&] { rig.prefill(0, prompt); });
  if (options.profile) {  // the last chunk of one more prefill, per dispatch
    rig.model->set_profiling(true);
    rig.prefill(0, prompt);
    emit_profile("prefill", model_label(options.model), "prompt", options.prompt,
                 rig.model->last_dispatch_times(),
                 med * std::min<double>(1.0, static_cast<double>(options.max_batch_tokens) / options.prompt));
    rig.model->set_profiling(false);
  }
  Row("prefill")
      .text("model", model_label(options.model))
      .text("device", ctx.device().info().name)
      .text("path", "GpuModel")
      .integer("prompt", options.prompt)
      .integer("chunk", rig.model->options().max_batch_tokens)
      .integer("deterministic", options.deterministic ? 1 : 0)
      .integer("attention_split", options.attention_split)
      .integer("paged_decode", options.paged_decode ? 1 : 0)
      .integer("k_splits", options.k_splits)
      .integer("coopmat2", options.coopmat2 ? 1 : 0)
      .integer("f16_x", options.f32_x ? 0 : 1)
      .text("tiles", options.tiles)
      .num("prefill_ms", med * 1e3)
      .num("tok_s", options.prompt / med)
      .integer("repeats", common.repeats)
      .emit();
}

namespace {

// One more decode step with a timestamp after every dispatch (recorded, then replayed: the replay is timed).
void profile_step(ModelRig& rig, Batch& batch, const DecodeOptions& options, double step_seconds) {
  rig.model->set_profiling(true);
  for (int i = 0; i < 2; ++i) {
    for (auto& p : batch.positions) ++p;
    rig.model->forward(batch);
  }
  const std::vector<vk::DispatchTime> times = rig.model->last_dispatch_times();
  rig.model->set_profiling(false);
  emit_profile("decode", model_label(options.model), "sequences", options.sequences, times, step_seconds);
}

// `tokens` more decode steps with the device's time on each (two timestamps, nothing serialized) beside
// the host's: what the step spends outside the device (submission, wake-up, read-back) is the difference.
void span_steps(ModelRig& rig, Batch& batch, const DecodeOptions& options) {
  rig.model->set_span_timing(true);
  std::vector<double> wall, span;
  for (uint32_t i = 0; i < options.tokens + 2; ++i) {  // the first two record the step
    for (auto& p : batch.positions) ++p;
    const auto start = Clock::now();
    rig.model->forward(batch);
    const double sec = seconds_since(start);
    if (i >= 2) {
      wall.push_back(sec * 1e3);
      span.push_back(rig.model->last_span_ms());
    }
  }
  rig.model->set_span_timing(false);
  const double wall_ms = median(wall), span_ms = median(span);
  Row("decode_span")
      .text("model", model_label(options.model))
      .integer("context", options.context)
      .integer("sequences", options.sequences)
      .num("wall_ms", wall_ms)
      .num("gpu_span_ms", span_ms)
      .num("outside_us", (wall_ms - span_ms) * 1e3)
      .emit();
}

}  // namespace

void run_decode(const CommonOptions& common, const DecodeOptions& options) {
  vk::ContextOptions context_opts = context_options(common);
  context_opts.pipeline_statistics = options.shader_stats;
  vk::Context ctx(context_opts);
  const uint32_t steps = common.warmup + options.tokens;
  GpuModelOptions knobs;
  knobs.deterministic = options.deterministic;
  knobs.attention_split = options.attention_split;
  knobs.attention_key_lanes = options.attention_key_lanes;
  if (options.no_prefetch) {
    knobs.l2_prefetch = engine::L2Prefetch::Off;
  } else if (options.prefetch_o || options.prefetch_ffn_mib) {
    knobs.l2_prefetch = engine::L2Prefetch::Custom;
    knobs.prefetch_plan = {options.prefetch_o, options.prefetch_ffn_mib, options.prefetch_groups};
  }
  knobs.logits_copy = options.logits_copy;
  knobs.logits_rows_per_lane = options.logits_rows_per_lane;
  if (options.blocking_wait) knobs.spin_wait_us = 0;
  knobs.k_splits = options.k_splits;
  knobs.q8_max_tokens = options.q8_max_tokens;
  knobs.decode_attention = !options.paged_decode;
  ModelRig rig(ctx, options.model, options.sequences,
               options.context + steps + 3 + (options.span ? options.tokens : 0), 512,
               knobs);  // +3: the profile's steps; and --span's
  // Every sequence gets `context` tokens of KV first (untimed).
  for (uint32_t s = 0; s < options.sequences; ++s)
    rig.prefill(s, pseudo_random_tokens(options.context, 100 + s, rig.config.n_vocab));
  Batch batch;
  for (uint32_t s = 0; s < options.sequences; ++s) batch.add_sequence(rig.page_table(s));
  std::vector<double> step_seconds;
  batch.greedy_only = options.greedy || options.ahead;
  const auto next = pseudo_random_tokens(steps * options.sequences, 7, rig.config.n_vocab);
  // Step `step`'s batch: one token a sequence (speed only: no sampling needed; under --ahead every step but
  // the first is fed and its tokens are placeholders), every sequence's logits read back as a real decode.
  const auto fill = [&](uint32_t step) {
    batch.tokens.clear();
    batch.positions.clear();
    batch.seq.clear();
    batch.logits_for.clear();
    for (uint32_t s = 0; s < options.sequences; ++s) {
      batch.tokens.push_back(next[step * options.sequences + s]);
      batch.positions.push_back(options.context + step);
      batch.seq.push_back(s);
      batch.logits_for.push_back(s);
    }
  };
  if (options.ahead) {
    // Each step goes in while the one before runs, its tokens that step's greedy ones (read on the GPU);
    // a step's time is from the end of the one before to its own end, as the host sees them.
    auto last_end = Clock::now();
    for (uint32_t step = 0; step <= steps; ++step) {
      if (step < steps) {
        fill(step);
        batch.fed = step > 0;
        rig.model->submit(batch);
      }
      if (step == 0) continue;
      rig.model->collect();
      const auto end = Clock::now();
      if (step > common.warmup) step_seconds.push_back(std::chrono::duration<double>(end - last_end).count());
      last_end = end;
    }
    batch.fed = false;
  }
  for (uint32_t step = 0; step < steps && !options.ahead; ++step) {
    fill(step);
    const auto start = Clock::now();
    rig.model->forward(batch);
    const double sec = seconds_since(start);
    if (step >= common.warmup) step_seconds.push_back(sec);
  }
  double total = 0;
  for (const double s : step_seconds) total += s;
  const double step_med = median(step_seconds);
  const uint64_t weight_bytes = rig.model->weight_bytes();
  // One step reads every weight once, whatever the batch: steps/s cannot beat bandwidth / weight bytes.
  const double bound_steps = options.read_bandwidth / static_cast<double>(weight_bytes);
  Row("decode")
      .text("model", model_label(options.model))
      .text("device", ctx.device().info().name)
      .integer("context", options.context)
      .integer("sequences", options.sequences)
      .integer("tokens", options.tokens)
      .integer("deterministic", options.deterministic ? 1 : 0)
      .integer("attention_split", options.attention_split)
      .integer("attention_key_lanes", options.attention_key_lanes)
      .integer("no_prefetch", options.no_prefetch ? 1 : 0)
      .integer("prefetch_o", options.prefetch_o ? 1 : 0)
      .integer("prefetch_ffn_mib", options.prefetch_ffn_mib)
      .integer("prefetch_groups", options.prefetch_groups)
      .integer("greedy", options.greedy ? 1 : 0)
      .integer("ahead", options.ahead ? 1 : 0)
      .integer("logits_rows_per_lane", options.logits_rows_per_lane)
      .integer("logits_copy", options.logits_copy ? 1 : 0)
      .integer("blocking_wait", options.blocking_wait ? 1 : 0)
      .integer("k_splits", options.k_splits)
      .integer("q8_tokens", options.q8_max_tokens)
      .integer("paged_decode", options.paged_decode ? 1 : 0)
      .num("step_ms", step_med * 1e3)
      .num("tok_s", options.sequences / step_med)
      .num("tok_s_mean", static_cast<double>(options.sequences) * step_seconds.size() / total)
      .num("tok_s_per_seq", 1 / step_med)
      .integer("weight_bytes", static_cast<int64_t>(weight_bytes))
      .num("read_bw", options.read_bandwidth)
      .num("bound_tok_s", bound_steps)
      .num("bound_ratio", (1 / step_med) / bound_steps)
      .emit();
  if (options.span) span_steps(rig, batch, options);
  if (options.profile) profile_step(rig, batch, options, step_med);
  if (options.shader_stats) emit_shader_stats(ctx);
}

}  // namespace kvtrie::bench
