// multiturn: `conversations` conversations of `turns` turns sharing one system prompt, through GpuEngine
// (greedy, or --temperature with the sampler's other defaults and seed 1; ignore_eos). Each turn submits
// every conversation's next prompt (history + new user tokens) at once. Probes run alone so their TTFT has no
// queueing: the very first request (cold), then after the run the newest conversation's next turn (a device
// hit) and the oldest one's (a host hit when the device tier was too small for the working set). The baseline
// repeats the run with a distinct cache_namespace per request, so nothing is shared.
#include <algorithm>
#include <optional>
#include <thread>

#include "base/error.h"
#include "bench/perf/benches.h"
#include "kernels/vk/context.h"
#include "runner/engine/gpu_engine.h"
#include "runner/model/gguf_file.h"
#include "runner/model/model_config.h"
#include "runner/tokenizer/tokenizer.h"

namespace kvtrie::bench {

using namespace engine;
using Clock = std::chrono::steady_clock;

namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  GenerationStats stats;
};

GenerationStream submit(Engine& eng, const std::vector<int32_t>& prompt, uint32_t answer, std::string ns,
                        float temperature = 0, float repeat_penalty = 1) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = static_cast<int32_t>(answer);
  r.sampling.temperature = temperature;
  r.sampling.repeat_penalty = repeat_penalty;
  r.sampling.seed = 1;
  r.ignore_eos = true;
  r.cache_namespace = std::move(ns);
  auto submitted = eng.submit(std::move(r));
  if (auto* rejected = std::get_if<SubmitRejection>(&submitted))
    throw Error("multiturn: the engine rejected a request: " + rejected->message);
  return std::move(std::get<GenerationStream>(submitted));
}

Outcome collect(GenerationStream& stream) {
  Outcome o;
  Chunk chunk;
  while (stream.next(chunk, std::chrono::seconds(600)) == StreamChannel::Poll::Chunk) {
    o.tokens.insert(o.tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
    if (chunk.final) o.stats = *chunk.final;
  }
  return o;
}

struct RunTotals {
  double seconds = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, cached_host = 0, completion_tokens = 0;
  std::vector<double> ttft_cold, ttft_device, ttft_host;  // under load (queueing included)
  std::optional<GenerationStats> first, device_probe, host_probe;
};

void account(RunTotals& t, const GenerationStats& s) {
  t.prompt_tokens += s.prompt_tokens;
  t.cached_tokens += s.cached_tokens;
  t.cached_host += s.cached_tokens_host;
  t.completion_tokens += s.completion_tokens;
  if (s.cached_tokens == 0)
    t.ttft_cold.push_back(s.ttft_ms);
  else if (s.cached_tokens_host > 0)
    t.ttft_host.push_back(s.ttft_ms);
  else
    t.ttft_device.push_back(s.ttft_ms);
}

RunTotals run_conversations(Engine& eng, const MultiturnOptions& o, uint32_t vocab, bool shared) {
  RunTotals t;
  uint64_t request_id = 0;
  // Without sharing every request gets its own namespace, so no request ever hits another's prefix.
  auto ns = [&] { return shared ? std::string() : std::string("r").append(std::to_string(request_id++)); };
  {
    // One short request in its own namespace first: first-dispatch costs must not count as the cold TTFT.
    GenerationStream warm = submit(eng, pseudo_random_tokens(32, 5, vocab), 4, "warmup");
    collect(warm);
  }
  const auto system = pseudo_random_tokens(o.system, 1, vocab);
  std::vector<std::vector<int32_t>> history(o.conversations, system);
  const auto start = Clock::now();
  for (uint32_t turn = 0; turn < o.turns; ++turn) {
    std::vector<GenerationStream> streams;
    for (uint32_t c = 0; c < o.conversations; ++c) {
      const auto user = pseudo_random_tokens(o.user, 1000 + c * 64 + turn, vocab);
      history[c].insert(history[c].end(), user.begin(), user.end());
      streams.push_back(submit(eng, history[c], o.answer, ns(), o.temperature, o.repeat_penalty));
      if (turn == 0 && c == 0) {
        // The first request alone: the system prompt is computed once, cold, with no queueing.
        Outcome first = collect(streams.back());
        t.first = first.stats;
        history[0].insert(history[0].end(), first.tokens.begin(), first.tokens.end());
        account(t, first.stats);
      }
    }
    for (uint32_t c = 0; c < o.conversations; ++c) {
      if (turn == 0 && c == 0) continue;
      Outcome r = collect(streams[c]);
      history[c].insert(history[c].end(), r.tokens.begin(), r.tokens.end());
      account(t, r.stats);
    }
  }
  t.seconds = seconds_since(start);
  if (shared) {
    // Probes, alone: the newest conversation continues (its history was just computed: device tier), then
    // the oldest (its pages were the first demoted when the device tier is smaller than the working set).
    const auto probe_user = pseudo_random_tokens(o.user, 99, vocab);
    auto probe = [&](uint32_t c) {
      auto prompt = history[c];
      prompt.insert(prompt.end(), probe_user.begin(), probe_user.end());
      GenerationStream s = submit(eng, prompt, o.answer, "", o.temperature, o.repeat_penalty);
      return collect(s).stats;
    };
    t.device_probe = probe(o.conversations - 1);
    t.host_probe = probe(0);
  }
  return t;
}

void emit_run(const MultiturnOptions& o, const std::string& device, const char* mode, const RunTotals& t,
              const CacheStats& cache) {
  Row row("multiturn");
  row.text("model", model_label(o.model))
      .text("device", device)
      .text("cache", mode)
      .integer("conversations", o.conversations)
      .integer("turns", o.turns)
      .integer("system", o.system)
      .integer("user", o.user)
      .integer("answer", o.answer)
      .num("temperature", o.temperature)
      .num("repeat_penalty", o.repeat_penalty)
      .integer("gpu_top_candidates", o.gpu_top_candidates ? 1 : 0)
      .integer("greedy_ahead", o.greedy_ahead ? 1 : 0)
      .integer("parallel", o.parallel)
      .num("seconds", t.seconds)
      .integer("prompt_tokens", static_cast<int64_t>(t.prompt_tokens))
      .integer("completion_tokens", static_cast<int64_t>(t.completion_tokens))
      .num("hit_rate", t.prompt_tokens ? static_cast<double>(t.cached_tokens) / t.prompt_tokens : 0)
      .integer("cached_tokens_host", static_cast<int64_t>(t.cached_host))
      .num("completion_tok_s", t.completion_tokens / t.seconds)
      .num("total_tok_s", (t.prompt_tokens + t.completion_tokens) / t.seconds)
      .num("ttft_load_cold_ms", median(t.ttft_cold))
      .num("ttft_load_device_ms", median(t.ttft_device))
      .num("ttft_load_host_ms", median(t.ttft_host));
  if (t.first) row.num("ttft_cold_ms", t.first->ttft_ms);
  if (t.device_probe)
    row.num("ttft_device_hit_ms", t.device_probe->ttft_ms)
        .integer("device_probe_cached_device", t.device_probe->cached_tokens_device)
        .integer("device_probe_cached_host", t.device_probe->cached_tokens_host);
  if (t.host_probe)
    row.num("ttft_host_hit_ms", t.host_probe->ttft_ms)
        .integer("host_probe_cached_device", t.host_probe->cached_tokens_device)
        .integer("host_probe_cached_host", t.host_probe->cached_tokens_host)
        .integer("host_probe_prompt", t.host_probe->prompt_tokens);
  row.integer("demotions", static_cast<int64_t>(cache.demotions))
      .integer("promotions", static_cast<int64_t>(cache.promotions))
      .num("copy_gbs", cache.copy_seconds > 0
                           ? static_cast<double>(cache.copy_bytes_to_host + cache.copy_bytes_to_device) /
                                 cache.copy_seconds / 1e9
                           : 0)
      .integer("kv_device_bytes", static_cast<int64_t>(cache.device.bytes_budget))
      .integer("kv_host_bytes", static_cast<int64_t>(cache.host.bytes_budget))
      .emit();
}

}  // namespace

void run_multiturn(const CommonOptions& common, const MultiturnOptions& options) {
  vk::Context ctx(context_options(common));
  const GgufFile file = GgufFile::open(options.model);
  const ModelConfig mc = ModelConfig::from_gguf(file);
  const auto tokenizer = Tokenizer::from_gguf(file);
  // Room for the longest prompt: every turn's user and answer tokens plus the probe turn.
  const uint32_t longest = options.system + (options.turns + 1) * (options.user + options.answer);
  KVTRIE_CHECK(longest <= mc.n_ctx_train || mc.n_ctx_train == 0,
               "multiturn: conversations of " + std::to_string(longest) +
                   " tokens exceed the model's context " + std::to_string(mc.n_ctx_train) +
                   " (write the model with kvtrie-synth --ctx)");
  GpuEngineConfig config;
  config.n_ctx = longest;
  config.parallel = options.parallel;
  config.queue_capacity = std::max<uint32_t>(64, options.conversations);
  config.kv_device_bytes = options.kv_device_mib << 20;
  config.kv_host_bytes = options.kv_host_mib << 20;
  config.gpu_top_candidates = options.gpu_top_candidates;
  config.greedy_ahead = options.greedy_ahead;
  for (const bool shared : {true, false}) {
    if (!shared && !options.baseline) break;
    GpuEngine eng(ctx, file, *tokenizer, config);
    const RunTotals t = run_conversations(eng, options, mc.n_vocab, shared);
    emit_run(options, ctx.device().info().name, shared ? "on" : "off", t, eng.cache_stats());
    eng.shutdown(std::chrono::milliseconds(0));
  }
}

}  // namespace kvtrie::bench
