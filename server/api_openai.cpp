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

std::vector<ChatMessage> read_messages(const Json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array())
    throw_invalid("\"messages\" (an array of {role, content}) is required");
  if (it->empty()) throw_invalid("\"messages\" is empty");
  std::vector<ChatMessage> out;
  for (const auto& m : *it) {
    if (!m.is_object()) throw_invalid("each message must be an object with \"role\" and \"content\"");
    auto role = read_string(m, "role");
    if (!role || role->empty()) throw_invalid("each message needs a \"role\" string");
    // OpenAI's newer name for the system role.
    ChatMessage msg{*role == "developer" ? "system" : *role, ""};
    auto c = m.find("content");
    if (c != m.end() && c->is_string()) {
      msg.content = c->get<std::string>();
    } else if (c != m.end() && c->is_array()) {
      for (const auto& part : *c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          throw_invalid("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
        msg.content += part["text"].get<std::string>();
      }
    } else if (c != m.end() && !c->is_null()) {
      throw_invalid("\"content\" must be a string or an array of text parts");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].empty())
      throw_invalid("tool calls are not supported");
    if (!valid_utf8(msg.content)) throw_invalid("message content is not valid UTF-8");
    out.push_back(std::move(msg));
  }
  return out;
}

// Refuses what kvtrie does not do rather than ignoring it: an answer that silently lacks a requested feature
// (a tool call, a JSON schema) is worse than a clear 400.
void refuse_unsupported(const Json& body) {
  auto non_empty = [&](const char* key) {
    return body.contains(key) && !body[key].is_null() && !body[key].empty();
  };
  for (const char* key : {"tools", "functions"})
    if (non_empty(key)) throw_invalid(std::string("\"") + key + "\": tool calling is not supported");
  if (non_empty("logit_bias")) throw_invalid("\"logit_bias\" is not supported");
  if (non_empty("suffix")) throw_invalid("\"suffix\" is not supported");
  if (auto rf = body.find("response_format"); rf != body.end() && !rf->is_null()) {
    if (!rf->is_object() || rf->value("type", "") != "text")
      throw_invalid("\"response_format\": only {\"type\": \"text\"} is supported");
  }
  if (auto n = read_int(body, "n", 1, 128); n && *n != 1)
    throw_invalid("\"n\": only 1 choice per request is supported");
  if (auto n = read_int(body, "best_of", 1, 128); n && *n != 1)
    throw_invalid("\"best_of\": only 1 is supported");
}

// What both endpoints read the same way: sampling (OpenAI's names are kvtrie's, plus top_k, min_p and
// repeat_penalty as extensions), stop strings, the token limit and the cache namespace (vLLM's cache_salt).
void read_common(const Json& body, const LoadedModel& model, engine::GenerateRequest& req,
                 int32_t default_max) {
  refuse_unsupported(body);
  read_string(body, "model");  // any name: one model is served, and answers carry its own name
  const uint32_t n_ctx = model.engine->info().n_ctx;
  auto max_tokens = read_int(body, "max_completion_tokens", 1, n_ctx);
  if (!max_tokens) max_tokens = read_int(body, "max_tokens", 1, n_ctx);
  req.max_tokens = static_cast<int32_t>(max_tokens.value_or(default_max));
  read_sampling(body, req.sampling);
  req.stop = read_strings(body, "stop", 16).value_or(std::vector<std::string>{});
  req.cache_namespace =
      read_string(body, "cache_salt").value_or(read_string(body, "cache_namespace").value_or(""));
}

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;
};

StreamOptions read_stream_options(const Json& body) {
  StreamOptions o;
  o.stream = read_bool(body, "stream").value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw_invalid("\"stream_options\" must be an object");
    if (!o.stream) throw_invalid("\"stream_options\" is only allowed with \"stream\": true");
    o.include_usage = read_bool(*so, "include_usage").value_or(false);
  }
  return o;
}

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
  const Json body = parse_object(http.body);
  engine::GenerateRequest req;
  req.prompt = tokenize_prompt(model, Json(chat_prompt(model, body)), "messages", std::nullopt,
                               /*parse_special=*/true);
  read_common(body, model, req, -1);
  for (auto& s : chat_stop_strings(model.chat_format.family)) req.stop.push_back(s);
  const bool logprobs = read_bool(body, "logprobs").value_or(false);
  const auto top = read_int(body, "top_logprobs", 0, 20);
  if (top && !logprobs) throw_invalid("\"top_logprobs\" needs \"logprobs\": true");
  if (logprobs) req.logprobs = static_cast<uint32_t>(std::max<int64_t>(1, top.value_or(1)));
  const StreamOptions so = read_stream_options(body);
  check_fits(model, req);
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(req), http.caller);

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

// The prompt of /v1/completions: a string, token ids, or a one-element array of either.
Json single_prompt(const Json& body) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw_invalid("\"prompt\" is required");
  const Json& p = *it;
  if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
    if (p.size() != 1) throw_invalid("\"prompt\": only one prompt per request is supported");
    return p[0];
  }
  return p;
}

HttpResponse completions(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  const Json body = parse_object(http.body);
  const Json prompt = single_prompt(body);
  engine::GenerateRequest req;
  req.prompt = tokenize_prompt(model, prompt, "prompt", std::nullopt, /*parse_special=*/true);
  read_common(body, model, req, 16);  // OpenAI's default for this endpoint
  req.logprobs = static_cast<uint32_t>(read_int(body, "logprobs", 0, 20).value_or(0));
  const bool echo = read_bool(body, "echo").value_or(false);
  const StreamOptions so = read_stream_options(body);
  check_fits(model, req);
  const std::string echoed = !echo                ? ""
                             : prompt.is_string() ? prompt.get<std::string>()
                                                  : model.tokenizer->decode(req.prompt);
  const bool logprobs = req.logprobs > 0;
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(req), http.caller);

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

std::string chat_prompt(const LoadedModel& model, const Json& body) {
  const auto messages = read_messages(body);
  RenderOptions options;
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object()) throw_invalid("\"chat_template_kwargs\" must be an object");
    options.enable_thinking = read_bool(*kw, "enable_thinking").value_or(true);
  }
  return render_chat(model.chat_format, messages, options);
}

void register_openai_api(HttpServer& server, ModelHost& host) {
  auto chat = [&host](const HttpRequest& r) { return chat_completions(host, r); };
  server.route("POST", "/v1/chat/completions", chat);
  server.route("POST", "/chat/completions", chat);  // llama-server answers here too
  server.route("POST", "/v1/completions", [&host](const HttpRequest& r) { return completions(host, r); });
  server.route("GET", "/v1/models", [&host](const HttpRequest&) { return models(host); });
}

}  // namespace kvtrie::server
