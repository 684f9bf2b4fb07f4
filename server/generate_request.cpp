#include "server/generate_request.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "server/http_types.h"

namespace kvtrie::server {

namespace {

// Whether obj["type"] is the string `type` (json::value would throw on a "type" of another kind).
bool has_type(const Json& obj, std::string_view type) {
  const auto it = obj.find("type");
  return it != obj.end() && it->is_string() && it->get_ref<const std::string&>() == type;
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
        if (!part.is_object() || !has_type(part, "text") || !part.contains("text") ||
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
    if (!rf->is_object() || !has_type(*rf, "text"))
      throw_invalid("\"response_format\": only {\"type\": \"text\"} is supported");
  }
  if (auto n = read_int(body, "n", 1, 128); n && *n != 1)
    throw_invalid("\"n\": only 1 choice per request is supported");
  if (auto n = read_int(body, "best_of", 1, 128); n && *n != 1)
    throw_invalid("\"best_of\": only 1 is supported");
}

// What both OpenAI endpoints read the same way: sampling (OpenAI's names are kvtrie's, plus top_k, min_p and
// repeat_penalty as extensions), stop strings, the token limit and the cache namespace (vLLM's cache_salt).
void read_openai_common(const Json& body, uint32_t n_ctx, engine::GenerateRequest& req, int32_t default_max) {
  refuse_unsupported(body);
  read_string(body, "model");  // any name: one model is served, and answers carry its own name
  auto max_tokens = read_int(body, "max_completion_tokens", 1, n_ctx);
  if (!max_tokens) max_tokens = read_int(body, "max_tokens", 1, n_ctx);
  req.max_tokens = static_cast<int32_t>(max_tokens.value_or(default_max));
  read_sampling(body, req.sampling);
  req.stop = read_strings(body, "stop", 16).value_or(std::vector<std::string>{});
  req.cache_namespace =
      read_string(body, "cache_salt").value_or(read_string(body, "cache_namespace").value_or(""));
}

void read_stream_options(const Json& body, OpenAiRequest& out) {
  out.stream = read_bool(body, "stream").value_or(false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw_invalid("\"stream_options\" must be an object");
    if (!out.stream) throw_invalid("\"stream_options\" is only allowed with \"stream\": true");
    out.include_usage = read_bool(*so, "include_usage").value_or(false);
  }
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

}  // namespace

void read_sampling(const Json& obj, SamplingParams& p) {
  if (auto v = read_number(obj, "temperature", 0.0, 100.0)) p.temperature = static_cast<float>(*v);
  if (auto v = read_int(obj, "top_k", 0, 1 << 30)) p.top_k = static_cast<int32_t>(*v);
  if (auto v = read_number(obj, "top_p", 0.0, 1.0)) p.top_p = static_cast<float>(*v);
  if (auto v = read_number(obj, "min_p", 0.0, 1.0)) p.min_p = static_cast<float>(*v);
  if (auto v = read_number(obj, "typical_p", 0.0, 1.0)) p.typical_p = static_cast<float>(*v);
  if (auto v = read_number(obj, "repeat_penalty", 0.0, 100.0)) p.repeat_penalty = static_cast<float>(*v);
  if (auto v = read_int(obj, "repeat_last_n", -1, 1 << 20)) p.repeat_last_n = static_cast<int32_t>(*v);
  if (auto v = read_number(obj, "presence_penalty", -100.0, 100.0))
    p.presence_penalty = static_cast<float>(*v);
  if (auto v = read_number(obj, "frequency_penalty", -100.0, 100.0))
    p.frequency_penalty = static_cast<float>(*v);
  // Seeds come as any integer; -1 (and other negatives) mean "random" in llama.cpp and Ollama.
  if (auto v = read_int(obj, "seed", INT64_MIN, INT64_MAX)) {
    if (*v >= 0) p.seed = static_cast<uint64_t>(*v);
  }
  if (auto problem = validate(p)) throw_invalid(*problem);
}

std::vector<int32_t> tokenize_prompt(const Tokenizer& tok, const Json& prompt, const char* key,
                                     std::optional<bool> add_bos, bool parse_special) {
  std::vector<int32_t> ids;
  if (prompt.is_string()) {
    const std::string& text = prompt.get_ref<const std::string&>();
    if (text.empty()) throw_invalid(std::string("\"") + key + "\" is empty");
    if (text.size() > kMaxPromptBytes)
      throw_invalid(std::string("\"") + key + "\" is longer than " + std::to_string(kMaxPromptBytes) +
                    " bytes");
    if (!valid_utf8(text)) throw_invalid(std::string("\"") + key + "\" is not valid UTF-8");
    EncodeOptions options;
    options.add_bos = add_bos.value_or(tok.add_bos_default());
    options.parse_special = parse_special;
    ids = tok.encode(text, options);
  } else if (prompt.is_array()) {
    Json wrapper = {{key, prompt}};
    ids = *read_tokens(wrapper, key, static_cast<uint32_t>(tok.n_vocab()));
    if (add_bos.value_or(false) && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
      ids.insert(ids.begin(), tok.bos());
  } else {
    throw_invalid(std::string("\"") + key + "\" must be a string or an array of token ids, not " +
                  prompt.type_name());
  }
  if (ids.empty()) throw_invalid(std::string("\"") + key + "\" is empty");
  return ids;
}

void check_fits(uint32_t n_ctx, const engine::GenerateRequest& request) {
  if (request.prompt.size() >= n_ctx)
    throw_invalid("the prompt has " + std::to_string(request.prompt.size()) +
                  " tokens but the context holds " + std::to_string(n_ctx) +
                  " (prompt + at least one generated token)");
}

std::string chat_prompt(const ChatFormat& format, const Json& body) {
  const auto messages = read_messages(body);
  RenderOptions options;
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object()) throw_invalid("\"chat_template_kwargs\" must be an object");
    options.enable_thinking = read_bool(*kw, "enable_thinking").value_or(true);
  }
  return render_chat(format, messages, options);
}

NativeGenerate parse_native_generate(const Json& body, const RequestModel& model) {
  NativeGenerate out;
  out.stream = read_bool(body, "stream").value_or(true);
  engine::GenerateRequest& req = out.request;
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_tokens = body.contains("tokens") && !body["tokens"].is_null();
  if (has_prompt == has_tokens)
    throw_invalid("give exactly one of \"prompt\" (a string) and \"tokens\" (token ids)");
  auto add_bos = read_bool(body, "add_bos");
  if (has_prompt) {
    if (!body["prompt"].is_string())
      throw_invalid(std::string("\"prompt\" must be a string, not ") + body["prompt"].type_name());
    req.prompt = tokenize_prompt(model.tokenizer, body["prompt"], "prompt", add_bos, /*parse_special=*/true);
  } else {
    if (!body["tokens"].is_array())
      throw_invalid(std::string("\"tokens\" must be an array of token ids, not ") +
                    body["tokens"].type_name());
    req.prompt = tokenize_prompt(model.tokenizer, body["tokens"], "tokens", add_bos, false);
  }
  req.max_tokens = static_cast<int32_t>(read_int(body, "max_tokens", -1, model.n_ctx).value_or(128));
  read_sampling(body, req.sampling);
  req.stop = read_strings(body, "stop", 16).value_or(std::vector<std::string>{});
  req.logprobs = static_cast<uint32_t>(read_int(body, "logprobs", 0, 20).value_or(0));
  req.cache_namespace = read_string(body, "cache_namespace").value_or("");
  req.ignore_eos = read_bool(body, "ignore_eos").value_or(false);  // extension, as llama.cpp's: benchmarks
  check_fits(model.n_ctx, req);
  return out;
}

OpenAiRequest parse_openai_chat(const Json& body, const RequestModel& model) {
  OpenAiRequest out;
  engine::GenerateRequest& req = out.request;
  req.prompt = tokenize_prompt(model.tokenizer, Json(chat_prompt(model.chat_format, body)), "messages",
                               std::nullopt, /*parse_special=*/true);
  read_openai_common(body, model.n_ctx, req, -1);
  for (auto& s : chat_stop_strings(model.chat_format.family)) req.stop.push_back(s);
  out.logprobs = read_bool(body, "logprobs").value_or(false);
  const auto top = read_int(body, "top_logprobs", 0, 20);
  if (top && !out.logprobs) throw_invalid("\"top_logprobs\" needs \"logprobs\": true");
  if (out.logprobs) req.logprobs = static_cast<uint32_t>(std::max<int64_t>(1, top.value_or(1)));
  read_stream_options(body, out);
  check_fits(model.n_ctx, req);
  return out;
}

OpenAiRequest parse_openai_completion(const Json& body, const RequestModel& model) {
  OpenAiRequest out;
  engine::GenerateRequest& req = out.request;
  const Json prompt = single_prompt(body);
  req.prompt = tokenize_prompt(model.tokenizer, prompt, "prompt", std::nullopt, /*parse_special=*/true);
  read_openai_common(body, model.n_ctx, req, 16);  // OpenAI's default for this endpoint
  req.logprobs = static_cast<uint32_t>(read_int(body, "logprobs", 0, 20).value_or(0));
  out.logprobs = req.logprobs > 0;
  const bool echo = read_bool(body, "echo").value_or(false);
  read_stream_options(body, out);
  check_fits(model.n_ctx, req);
  if (echo) out.echoed = prompt.is_string() ? prompt.get<std::string>() : model.tokenizer.decode(req.prompt);
  return out;
}

LlamaCompletion parse_llama_completion(const Json& body, const RequestModel& model) {
  LlamaCompletion out;
  engine::GenerateRequest& req = out.request;
  if (!body.contains("prompt") || body["prompt"].is_null()) throw_invalid("\"prompt\" is required");
  req.prompt =
      tokenize_prompt(model.tokenizer, body["prompt"], "prompt", std::nullopt, /*parse_special=*/true);
  // n_predict -1 (and llama.cpp's -2) mean "until the context is full".
  const int64_t n_predict = read_int(body, "n_predict", -2, INT32_MAX).value_or(-1);
  req.max_tokens = n_predict < 0 ? -1 : static_cast<int32_t>(std::min<int64_t>(n_predict, model.n_ctx));
  read_sampling(body, req.sampling);
  req.stop = read_strings(body, "stop", 16).value_or(std::vector<std::string>{});
  req.logprobs = static_cast<uint32_t>(read_int(body, "n_probs", 0, 20).value_or(0));
  read_int(body, "n_keep", -1, INT32_MAX);  // context shift is not needed: prompts must fit
  read_bool(body, "cache_prompt");          // the prefix cache is always on
  req.ignore_eos = read_bool(body, "ignore_eos").value_or(false);
  check_fits(model.n_ctx, req);
  out.stream = read_bool(body, "stream").value_or(false);
  return out;
}

engine::GenerateRequest parse_ollama_runner_completion(const Json& body, const RequestModel& model) {
  auto prompt = read_string(body, "Prompt");
  if (!prompt) throw_invalid("\"Prompt\" (a string) is required");
  Json options = Json::object();
  if (body.contains("Options") && !body["Options"].is_null()) {
    if (!body["Options"].is_object()) throw_invalid("\"Options\" must be an object");
    options = body["Options"];
  }
  engine::GenerateRequest req;
  req.prompt =
      tokenize_prompt(model.tokenizer, Json(*prompt), "Prompt", std::nullopt, /*parse_special=*/true);
  const int64_t n = read_int(options, "num_predict", -2, INT32_MAX).value_or(-1);
  req.max_tokens = n < 0 ? -1 : static_cast<int32_t>(std::min<int64_t>(n, model.n_ctx));
  read_sampling(options, req.sampling);
  req.stop = read_strings(options, "stop", 16).value_or(std::vector<std::string>{});
  check_fits(model.n_ctx, req);
  return req;
}

}  // namespace kvtrie::server
