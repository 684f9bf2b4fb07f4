#include "server/api_llama.h"

#include "server/api_tokenize.h"
#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

using engine::Chunk;
using engine::StopKind;

const char* stop_type(StopKind k) {
  switch (k) {
    case StopKind::Eos:
      return "eos";
    case StopKind::StopString:
      return "word";
    case StopKind::Length:
      return "limit";
    case StopKind::Cancelled:
      return "none";
  }
  return "none";
}

Json timings_json(const engine::GenerationStats& s) {
  const uint32_t prompt_n = s.prompt_tokens - s.cached_tokens;
  const double predicted_ms = s.decode_ms;
  return {{"cache_n", s.cached_tokens},
          {"prompt_n", prompt_n},
          {"prompt_ms", s.prompt_ms},
          {"prompt_per_token_ms", prompt_n ? s.prompt_ms / prompt_n : 0.0},
          {"prompt_per_second", s.prompt_ms > 0 ? prompt_n * 1000.0 / s.prompt_ms : 0.0},
          {"predicted_n", s.completion_tokens},
          {"predicted_ms", predicted_ms},
          {"predicted_per_token_ms", s.completion_tokens ? predicted_ms / s.completion_tokens : 0.0},
          {"predicted_per_second", s.tokens_per_second}};
}

Json probs_json(const Tokenizer& tok, const std::vector<engine::TokenLogprob>& lps) {
  Json arr = Json::array();
  for (const auto& lp : lps) {
    Json top = Json::array();
    for (const auto& t : lp.top)
      top.push_back({{"id", t.token}, {"token", tok.token_piece(t.token)}, {"logprob", t.logprob}});
    arr.push_back({{"id", lp.token},
                   {"token", tok.token_piece(lp.token)},
                   {"logprob", lp.logprob},
                   {"top_logprobs", top}});
  }
  return arr;
}

Json final_json(const LoadedModel& m, const engine::GenerationStats& s) {
  return {{"stop", true},
          {"stop_type", stop_type(s.stop_kind)},
          {"stopping_word", s.stop_string},
          {"tokens_predicted", s.completion_tokens},
          {"tokens_evaluated", s.prompt_tokens},
          {"tokens_cached", s.cached_tokens},
          {"truncated", false},
          {"model", m.name},
          {"id_slot", 0},
          {"timings", timings_json(s)}};
}

HttpResponse completion(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  LlamaCompletion parsed = parse_llama_completion(parse_object(http.body), request_model(model));
  const bool stream = parsed.stream;
  const bool probs = parsed.request.logprobs > 0;
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(parsed.request), http.caller);

  const LoadedModel* m = &model;
  if (!stream) {
    return collected_json(std::move(gen), [m, probs](const Chunk& all) {
      Json out = final_json(*m, *all.final);
      out["content"] = all.text;
      out["tokens"] = all.tokens;
      if (probs) out["completion_probabilities"] = probs_json(*m->tokenizer, all.logprobs);
      return out;
    });
  }
  auto format = [m, probs](const Chunk& c, bool last) {
    std::string out;
    if (!c.text.empty() || !c.tokens.empty()) {
      Json line = {{"content", c.text}, {"tokens", c.tokens}, {"stop", false}, {"id_slot", 0}, {"index", 0}};
      if (probs) line["completion_probabilities"] = probs_json(*m->tokenizer, c.logprobs);
      out += "data: " + line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
    }
    if (last) {
      Json done = final_json(*m, *c.final);
      done["content"] = "";
      done["tokens"] = Json::array();
      out += "data: " + done.dump() + "\n\n";
    }
    return out;
  };
  return HttpResponse::streaming(make_stream_body(std::move(gen), format), "text/event-stream");
}

HttpResponse health(ModelHost& host) {
  switch (host.phase()) {
    case ModelHost::Phase::Loading:
      return HttpResponse::json({{"status", "loading model"}}, 503);
    case ModelHost::Phase::Failed:
      return HttpResponse::json(
          {{"error", {{"code", 500}, {"message", host.failure()}, {"type", "server_error"}}}}, 500);
    case ModelHost::Phase::Ready:
      break;
  }
  if (!host.model()->engine->has_free_slot())
    return HttpResponse::json({{"status", "no slot available"}}, 503);
  return HttpResponse::json({{"status", "ok"}});
}

HttpResponse apply_template(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  return HttpResponse::json({{"prompt", chat_prompt(model.chat_format, parse_object(http.body))}});
}

HttpResponse props(ModelHost& host) {
  LoadedModel& model = host.require();
  const auto& info = model.engine->info();
  return HttpResponse::json({{"total_slots", info.parallel},
                             {"model_path", host.options().model},
                             {"chat_template", model.chat_template},
                             {"chat_format", chat_template_name(model.chat_format.family)},
                             {"default_generation_settings", {{"n_ctx", info.n_ctx}}},
                             {"build_info", std::string("kvtrie ") + KVTRIE_VERSION}});
}

}  // namespace

void register_llama_api(HttpServer& server, ModelHost& host) {
  server.route(
      "GET", "/health", [&host](const HttpRequest&) { return health(host); }, Access::Public);
  server.route("POST", "/completion", [&host](const HttpRequest& r) { return completion(host, r); });
  server.route("POST", "/completions", [&host](const HttpRequest& r) { return completion(host, r); });
  register_tokenize_api(server, host);
  server.route("GET", "/props", [&host](const HttpRequest&) { return props(host); });
  server.route("POST", "/apply-template", [&host](const HttpRequest& r) { return apply_template(host, r); });
}

}  // namespace kvtrie::server
