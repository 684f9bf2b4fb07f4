// The chat half of the llama-server compatible API: /apply-template and the OpenAI-style
// /v1/chat/completions (streaming as SSE chunks ending with "data: [DONE]", or one JSON object).
#include <atomic>
#include <chrono>

#include "server/api_llama.h"
#include "server/chat_template.h"
#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

using engine::Chunk;

ChatTemplate template_for(const ModelHost& host, const LoadedModel& model) {
  if (auto t = chat_template_from_name(host.options().chat_template)) return *t;
  return detect_chat_template(model.chat_template);
}

std::vector<ChatMessage> read_messages(const Json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array()) throw_invalid("\"messages\" (an array of {role, content}) is required");
  if (it->empty()) throw_invalid("\"messages\" is empty");
  std::vector<ChatMessage> out;
  for (const auto& m : *it) {
    if (!m.is_object()) throw_invalid("each message must be an object with \"role\" and \"content\"");
    auto role = read_string(m, "role");
    if (!role || role->empty()) throw_invalid("each message needs a \"role\" string");
    ChatMessage msg{*role, ""};
    auto c = m.find("content");
    if (c != m.end() && c->is_string()) {
      msg.content = c->get<std::string>();
    } else if (c != m.end() && c->is_array()) {
      // OpenAI content parts: only text parts are supported.
      for (const auto& part : *c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          throw_invalid("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
        msg.content += part["text"].get<std::string>();
      }
    } else if (c != m.end() && !c->is_null()) {
      throw_invalid("\"content\" must be a string or an array of text parts");
    }
    if (!valid_utf8(msg.content)) throw_invalid("message content is not valid UTF-8");
    out.push_back(std::move(msg));
  }
  return out;
}

HttpResponse apply_template(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  const Json body = parse_object(http.body);
  const auto messages = read_messages(body);
  return HttpResponse::json({{"prompt", apply_chat_template(template_for(host, model), messages, true)}});
}

const char* finish_reason(engine::StopKind k) {
  return k == engine::StopKind::Length ? "length" : "stop";
}

HttpResponse chat_completions(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  const Json body = parse_object(http.body);
  const ChatTemplate tmpl = template_for(host, model);
  const std::string prompt = apply_chat_template(tmpl, read_messages(body), true);

  engine::GenerateRequest req;
  req.prompt = tokenize_prompt(model, Json(prompt), "messages", std::nullopt, /*parse_special=*/true);
  const uint32_t n_ctx = model.engine->info().n_ctx;
  auto max_tokens = read_int(body, "max_completion_tokens", -1, n_ctx);
  if (!max_tokens) max_tokens = read_int(body, "max_tokens", -1, n_ctx);
  req.max_tokens = static_cast<int32_t>(max_tokens.value_or(-1));
  read_sampling(body, req.sampling);
  req.stop = read_strings(body, "stop", 16).value_or(std::vector<std::string>{});
  for (auto& s : chat_stop_strings(tmpl)) req.stop.push_back(s);
  if (auto n = read_int(body, "n", 1, 1); n && *n != 1) throw_invalid("only n = 1 is supported");
  if (read_bool(body, "logprobs").value_or(false))
    req.logprobs = static_cast<uint32_t>(read_int(body, "top_logprobs", 0, 20).value_or(1));
  check_fits(model, req);
  const bool stream = read_bool(body, "stream").value_or(false);
  engine::GenerationStream gen = submit_or_throw(*model.engine, std::move(req));

  const auto created = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  static std::atomic<uint64_t> next_id{1};
  const std::string id = "chatcmpl-" + std::to_string(created) + "-" + std::to_string(next_id++);
  auto usage = [](const engine::GenerationStats& s) {
    return Json{{"prompt_tokens", s.prompt_tokens}, {"completion_tokens", s.completion_tokens},
                {"total_tokens", s.prompt_tokens + s.completion_tokens}};
  };
  if (!stream) {
    return collected_json(std::move(gen), [id, created, name = model.name, usage](const Chunk& all) {
      const auto& s = *all.final;
      return Json{{"id", id},
                  {"object", "chat.completion"},
                  {"created", created},
                  {"model", name},
                  {"choices", Json::array({{{"index", 0},
                                            {"message", {{"role", "assistant"}, {"content", all.text}}},
                                            {"finish_reason", finish_reason(s.stop_kind)}}})},
                  {"usage", usage(s)}};
    });
  }
  const std::string model_name = model.name;
  auto first = std::make_shared<bool>(true);
  auto format = [=](const Chunk& c, bool last) {
    auto chunk = [&](Json delta, Json finish, Json extra = Json::object()) {
      Json j = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model_name},
                {"choices", Json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
      j.update(extra);
      return "data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
    };
    std::string out;
    if (*first) {
      out += chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
      *first = false;
    }
    if (!c.text.empty()) out += chunk({{"content", c.text}}, nullptr);
    if (last) {
      // The usage rides on the last chunk, as OpenAI's stream_options.include_usage does.
      out += chunk(Json::object(), finish_reason(c.final->stop_kind), {{"usage", usage(*c.final)}});
    }
    return out;
  };
  return HttpResponse::streaming(make_stream_body(std::move(gen), format, "data: [DONE]\n\n"), "text/event-stream");
}

HttpResponse models(ModelHost& host) {
  LoadedModel& model = host.require();
  return HttpResponse::json({{"object", "list"},
                             {"data", Json::array({{{"id", model.name}, {"object", "model"}, {"owned_by", "kvtrie"}}})}});
}

}  // namespace

void register_chat_api(HttpServer& server, ModelHost& host) {
  server.route("POST", "/apply-template", [&host](const HttpRequest& r) { return apply_template(host, r); });
  server.route("POST", "/v1/chat/completions", [&host](const HttpRequest& r) { return chat_completions(host, r); });
  server.route("POST", "/chat/completions", [&host](const HttpRequest& r) { return chat_completions(host, r); });
  server.route("GET", "/v1/models", [&host](const HttpRequest&) { return models(host); });
}

}  // namespace kvtrie::server
