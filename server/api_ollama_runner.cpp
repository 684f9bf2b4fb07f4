#include "server/api_ollama_runner.h"

#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

using engine::Chunk;

// Ollama's ServerStatus values.
enum RunnerStatus { kReady = 0, kNoSlots = 1, kLaunched = 2, kLoading = 3, kError = 5 };

int64_t ns(double ms) {
  return static_cast<int64_t>(ms * 1e6);
}

HttpResponse health(ModelHost& host) {
  int status = kLoading;
  switch (host.phase()) {
    case ModelHost::Phase::Loading:
      status = host.progress() > 0 ? kLoading : kLaunched;
      break;
    case ModelHost::Phase::Failed:
      status = kError;
      break;
    case ModelHost::Phase::Ready:
      status = host.model()->engine->has_free_slot() ? kReady : kNoSlots;
      break;
  }
  Json out = {{"status", status}, {"progress", host.progress()}};
  if (status == kError) out["error"] = host.failure();
  return HttpResponse::json(out);
}

HttpResponse load(ModelHost& host, const HttpRequest& http) {
  const Json body = parse_object(http.body);
  auto op = read_int(body, "Operation", 0, 3);
  if (!op) throw_invalid("\"Operation\" (0 fit, 1 alloc, 2 commit, 3 close) is required");
  for (const char* key : {"Parallel", "BatchSize", "KvSize", "NumThreads"}) read_int(body, key, 0, INT32_MAX);
  if (*op == 3) return HttpResponse::json({{"Success", true}});
  LoadedModel& model = host.require();
  // The CPU reference engine holds float32 weights in host memory; report that so Ollama's accounting is
  // honest.
  uint64_t weights = 0;
  for (const auto& t : model.file.tensors()) weights += t.element_count() * sizeof(float);
  return HttpResponse::json(
      {{"Success", true},
       {"Memory",
        {{"InputWeights", weights},
         {"CPU",
          {{"Name", "CPU"}, {"Weights", Json::array({weights})}, {"Cache", Json::array()}, {"Graph", 0}}},
         {"GPUs", Json::array()}}}});
}

HttpResponse completion(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  engine::GenerateRequest req = parse_ollama_runner_completion(parse_object(http.body), request_model(model));
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(req), http.caller);

  auto format = [](const Chunk& c, bool last) {
    std::string out;
    if (!c.text.empty())
      out += Json{{"content", c.text}, {"done", false}}.dump(-1, ' ', false, Json::error_handler_t::replace) +
             "\n";
    if (last) {
      const auto& s = *c.final;
      int reason = s.stop_kind == engine::StopKind::Length      ? 1
                   : s.stop_kind == engine::StopKind::Cancelled ? 2
                                                                : 0;
      out += Json{{"content", ""},
                  {"done", true},
                  {"done_reason", reason},
                  {"prompt_eval_count", s.prompt_tokens - s.cached_tokens},
                  {"prompt_eval_duration", ns(s.prompt_ms)},
                  {"eval_count", s.completion_tokens},
                  {"eval_duration", ns(s.decode_ms)}}
                 .dump() +
             "\n";
    }
    return out;
  };
  return HttpResponse::streaming(make_stream_body(std::move(gen), format), "application/x-ndjson");
}

}  // namespace

void register_ollama_runner_api(HttpServer& server, ModelHost& host) {
  server.route(
      "GET", "/health", [&host](const HttpRequest&) { return health(host); }, Access::Public);
  server.route("POST", "/load", [&host](const HttpRequest& r) { return load(host, r); });
  server.route("POST", "/completion", [&host](const HttpRequest& r) { return completion(host, r); });
}

}  // namespace kvtrie::server
