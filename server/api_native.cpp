#include "server/api_native.h"

#include "server/api_tokenize.h"
#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

using engine::Chunk;

Json stats_json(const engine::GenerationStats& s) {
  return {{"done", true},
          {"done_reason", engine::done_reason_name(s.stop_kind)},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"cached_tokens_device", s.cached_tokens_device},
          {"cached_tokens_host", s.cached_tokens_host},
          {"cached_tokens_disk", s.cached_tokens_disk},
          {"completion_tokens", s.completion_tokens},
          {"ttft_ms", s.ttft_ms},
          {"prompt_ms", s.prompt_ms},
          {"decode_ms", s.decode_ms},
          {"tokens_per_second", s.tokens_per_second}};
}

HttpResponse generate(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  NativeGenerate parsed = parse_native_generate(parse_object(http.body), request_model(model));
  const bool stream = parsed.stream;
  const bool want_logprobs = parsed.request.logprobs > 0;
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(parsed.request), http.caller);

  if (!stream) {
    return collected_json(std::move(gen), [want_logprobs](const Chunk& all) {
      Json out = stats_json(*all.final);
      out["text"] = all.text;
      out["tokens"] = all.tokens;
      if (want_logprobs) out["logprobs"] = logprobs_json(all.logprobs);
      return out;
    });
  }
  auto format = [want_logprobs](const Chunk& c, bool last) {
    std::string out;
    if (!c.text.empty() || !c.tokens.empty()) {
      Json line = {{"text", c.text}, {"tokens", c.tokens}};
      if (want_logprobs) line["logprobs"] = logprobs_json(c.logprobs);
      out += line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    }
    if (last) {
      Json done = stats_json(*c.final);
      done["text"] = "";
      out += done.dump() + "\n";
    }
    return out;
  };
  return HttpResponse::streaming(make_stream_body(std::move(gen), format), "application/x-ndjson");
}

HttpResponse health(ModelHost& host) {
  switch (host.phase()) {
    case ModelHost::Phase::Ready:
      return HttpResponse::json({{"status", "ok"}});
    case ModelHost::Phase::Loading:
      return HttpResponse::json({{"status", "loading model"}}, 503);
    case ModelHost::Phase::Failed:
      break;
  }
  return HttpResponse::json({{"status", "error"}, {"error", host.failure()}}, 500);
}

}  // namespace

void register_native_api(HttpServer& server, ModelHost& host) {
  server.route("POST", "/generate", [&host](const HttpRequest& r) { return generate(host, r); });
  register_tokenize_api(server, host);
  server.route(
      "GET", "/health", [&host](const HttpRequest&) { return health(host); }, Access::Public);
}

}  // namespace kvtrie::server
