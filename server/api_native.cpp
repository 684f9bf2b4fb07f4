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
          {"completion_tokens", s.completion_tokens},
          {"ttft_ms", s.ttft_ms},
          {"prompt_ms", s.prompt_ms},
          {"decode_ms", s.decode_ms},
          {"tokens_per_second", s.tokens_per_second}};
}

engine::GenerateRequest parse_generate(const Json& body, const LoadedModel& model) {
  engine::GenerateRequest req;
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_tokens = body.contains("tokens") && !body["tokens"].is_null();
  if (has_prompt == has_tokens)
    throw_invalid("give exactly one of \"prompt\" (a string) and \"tokens\" (token ids)");
  auto add_bos = read_bool(body, "add_bos");
  if (has_prompt) {
    if (!body["prompt"].is_string())
      throw_invalid(std::string("\"prompt\" must be a string, not ") + body["prompt"].type_name());
    req.prompt = tokenize_prompt(model, body["prompt"], "prompt", add_bos, /*parse_special=*/true);
  } else {
    if (!body["tokens"].is_array())
      throw_invalid(std::string("\"tokens\" must be an array of token ids, not ") +
                    body["tokens"].type_name());
    req.prompt = tokenize_prompt(model, body["tokens"], "tokens", add_bos, false);
  }
  const uint32_t n_ctx = model.engine->info().n_ctx;
  req.max_tokens = static_cast<int32_t>(read_int(body, "max_tokens", -1, n_ctx).value_or(128));
  read_sampling(body, req.sampling);
  req.stop = read_strings(body, "stop", 16).value_or(std::vector<std::string>{});
  req.logprobs = static_cast<uint32_t>(read_int(body, "logprobs", 0, 20).value_or(0));
  req.cache_namespace = read_string(body, "cache_namespace").value_or("");
  req.ignore_eos = read_bool(body, "ignore_eos").value_or(false);  // extension, as llama.cpp's: benchmarks
  check_fits(model, req);
  return req;
}

HttpResponse generate(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  const Json body = parse_object(http.body);
  const bool stream = read_bool(body, "stream").value_or(true);
  engine::GenerateRequest req = parse_generate(body, model);
  const bool want_logprobs = req.logprobs > 0;
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(req), http.caller);

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
