#include "server/api_openai.h"

#include <atomic>
#include <chrono>

#include "server/chat_template.h"
#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

using engine::Chunk;
using engine::GenerationStats;

const char* finish_reason(engine::StopKind k) {
  return k == engine::StopKind::Length ? "length" : "stop";
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string next_id(const char* prefix) {
  static std::atomic<uint64_t> counter{1};
  return std::string(prefix) + std::to_string(unix_now()) + "-" + std::to_string(counter++);
}

std::string sse(const Json& event) {
  return "data: " + event.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

Json usage_json(const GenerationStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.completion_tokens},
          {"total_tokens", s.prompt_tokens + s.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
}

// The last streamed event under stream_options.include_usage, as OpenAI sends it: the stream's envelope with
// no choices and the request's usage.
std::string usage_event(Json envelope, const GenerationStats& s) {
  envelope["choices"] = Json::array();
  envelope["usage"] = usage_json(s);
  return sse(envelope);
}

// What a streamed answer needs of the request, captured by the chunk formatters.
struct StreamOptions {
  bool stream = false;
  bool include_usage = false;
};

Json bytes_of(const std::string& s) {
  Json out = Json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
// "bytes"}]}]}.
Json chat_logprobs(const Tokenizer& tok, const std::vector<engine::TokenLogprob>& lps) {
  Json content = Json::array();
  for (const auto& lp : lps) {
    Json top = Json::array();
    for (const auto& t : lp.top) {
      const std::string piece = tok.token_piece(t.token);
      top.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}});
    }
    const std::string piece = tok.token_piece(lp.token);
    content.push_back(
        {{"token", piece}, {"logprob", lp.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Legacy completions logprobs: parallel arrays, top alternatives as {token: logprob} objects.
Json completion_logprobs(const Tokenizer& tok, const std::vector<engine::TokenLogprob>& lps,
                         size_t text_offset) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  for (const auto& lp : lps) {
    const std::string piece = tok.token_piece(lp.token);
    tokens.push_back(piece);
    token_logprobs.push_back(lp.logprob);
    Json alternatives = Json::object();
    for (const auto& t : lp.top) alternatives[tok.token_piece(t.token)] = t.logprob;
    top.push_back(alternatives);
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

HttpResponse chat_completions(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  OpenAiRequest parsed = parse_openai_chat(parse_object(http.body), request_model(model));
  const StreamOptions so{parsed.stream, parsed.include_usage};
  const bool logprobs = parsed.logprobs;
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(parsed.request), http.caller);

  const std::string id = next_id("chatcmpl-");
  const int64_t created = unix_now();
  const LoadedModel* m = &model;
  auto envelope = [id, created, m](const char* object) {
    return Json{{"id", id},
                {"object", object},
                {"created", created},
                {"model", m->name},
                {"system_fingerprint", std::string("kvtrie-") + KVTRIE_VERSION}};
  };
  if (!so.stream) {
    return collected_json(std::move(gen), [envelope, m, logprobs](const Chunk& all) {
      Json choice = {{"index", 0},
                     {"message", {{"role", "assistant"}, {"content", all.text}}},
                     {"logprobs", logprobs ? chat_logprobs(*m->tokenizer, all.logprobs) : Json()},
                     {"finish_reason", finish_reason(all.final->stop_kind)}};
      Json out = envelope("chat.completion");
      out["choices"] = Json::array({choice});
      out["usage"] = usage_json(*all.final);
      return out;
    });
  }
  auto first = std::make_shared<bool>(true);
  auto format = [envelope, m, logprobs, so, first](const Chunk& c, bool last) {
    auto chunk = [&](Json delta, Json finish, Json lp = Json()) {
      Json j = envelope("chat.completion.chunk");
      j["choices"] = Json::array({{{"index", 0},
                                   {"delta", std::move(delta)},
                                   {"logprobs", std::move(lp)},
                                   {"finish_reason", std::move(finish)}}});
      if (so.include_usage) j["usage"] = nullptr;
      return sse(j);
    };
    std::string out;
    if (*first) {
      out += chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
      *first = false;
    }
    if (!c.text.empty() || (logprobs && !c.logprobs.empty()))
      out +=
          chunk({{"content", c.text}}, nullptr, logprobs ? chat_logprobs(*m->tokenizer, c.logprobs) : Json());
    if (last) {
      out += chunk(Json::object(), finish_reason(c.final->stop_kind));
      if (so.include_usage) out += usage_event(envelope("chat.completion.chunk"), *c.final);
    }
    return out;
  };
  return HttpResponse::streaming(make_stream_body(std::move(gen), format, "data: [DONE]\n\n"),
                                 "text/event-stream");
}

HttpResponse completions(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  OpenAiRequest parsed = parse_openai_completion(parse_object(http.body), request_model(model));
  const StreamOptions so{parsed.stream, parsed.include_usage};
  const std::string echoed = std::move(parsed.echoed);
  const bool logprobs = parsed.logprobs;
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(parsed.request), http.caller);

  const std::string id = next_id("cmpl-");
  const int64_t created = unix_now();
  const LoadedModel* m = &model;
  auto envelope = [id, created, m]() {
    return Json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", m->name},
                {"system_fingerprint", std::string("kvtrie-") + KVTRIE_VERSION}};
  };
  if (!so.stream) {
    return collected_json(std::move(gen), [envelope, m, logprobs, echoed](const Chunk& all) {
      Json out = envelope();
      out["choices"] = Json::array(
          {{{"index", 0},
            {"text", echoed + all.text},
            {"logprobs", logprobs ? completion_logprobs(*m->tokenizer, all.logprobs, echoed.size()) : Json()},
            {"finish_reason", finish_reason(all.final->stop_kind)}}});
      out["usage"] = usage_json(*all.final);
      return out;
    });
  }
  auto offset = std::make_shared<size_t>(0);
  auto format = [envelope, m, logprobs, so, echoed, offset](const Chunk& c, bool last) {
    auto event = [&](const std::string& text, Json lp, Json finish) {
      Json j = envelope();
      j["choices"] = Json::array({{{"index", 0},
                                   {"text", text},
                                   {"logprobs", std::move(lp)},
                                   {"finish_reason", std::move(finish)}}});
      if (so.include_usage) j["usage"] = nullptr;
      return sse(j);
    };
    std::string out;
    std::string text = c.text;
    if (*offset == 0 && !echoed.empty()) text = echoed + text;
    if (!text.empty() || (logprobs && !c.logprobs.empty())) {
      out +=
          event(text, logprobs ? completion_logprobs(*m->tokenizer, c.logprobs, *offset) : Json(), nullptr);
      *offset += text.size();
    }
    if (last) {
      out += event("", Json(), finish_reason(c.final->stop_kind));
      if (so.include_usage) out += usage_event(envelope(), *c.final);
    }
    return out;
  };
  return HttpResponse::streaming(make_stream_body(std::move(gen), format, "data: [DONE]\n\n"),
                                 "text/event-stream");
}

HttpResponse models(ModelHost& host) {
  LoadedModel& model = host.require();
  static const int64_t started = unix_now();
  return HttpResponse::json({{"object", "list"},
                             {"data", Json::array({{{"id", model.name},
                                                    {"object", "model"},
                                                    {"created", started},
                                                    {"owned_by", "kvtrie"},
                                                    {"max_model_len", model.engine->info().n_ctx}}})}});
}

}  // namespace

void register_openai_api(HttpServer& server, ModelHost& host) {
  auto chat = [&host](const HttpRequest& r) { return chat_completions(host, r); };
  server.route("POST", "/v1/chat/completions", chat);
  server.route("POST", "/chat/completions", chat);  // llama-server answers here too
  server.route("POST", "/v1/completions", [&host](const HttpRequest& r) { return completions(host, r); });
  server.route("GET", "/v1/models", [&host](const HttpRequest&) { return models(host); });
}

}  // namespace kvtrie::server
