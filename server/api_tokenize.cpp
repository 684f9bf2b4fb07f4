#include "server/api_tokenize.h"

#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

HttpResponse tokenize(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  const Json body = parse_object(http.body);
  auto content = read_string(body, "content");
  if (!content) throw_invalid("\"content\" (a string) is required");
  if (content->size() > kMaxPromptBytes) throw_invalid("\"content\" is too long");
  if (!valid_utf8(*content)) throw_invalid("\"content\" is not valid UTF-8");
  const bool add_special = read_bool(body, "add_special").value_or(false);
  const bool parse_special = read_bool(body, "parse_special").value_or(true);
  const bool with_pieces = read_bool(body, "with_pieces").value_or(false);
  const auto ids = model.tokenizer->encode(*content, add_special, parse_special);
  if (!with_pieces) return HttpResponse::json({{"tokens", ids}});
  Json arr = Json::array();
  for (int32_t id : ids) arr.push_back({{"id", id}, {"piece", model.tokenizer->token_piece(id)}});
  return HttpResponse::json({{"tokens", arr}});
}

HttpResponse detokenize(ModelHost& host, const HttpRequest& http) {
  LoadedModel& model = host.require();
  const Json body = parse_object(http.body);
  auto tokens = read_tokens(body, "tokens", static_cast<uint32_t>(model.tokenizer->n_vocab()));
  if (!tokens) throw_invalid("\"tokens\" (an array of token ids) is required");
  return HttpResponse::json({{"content", model.tokenizer->decode(*tokens)}});
}

}  // namespace

void register_tokenize_api(HttpServer& server, ModelHost& host) {
  server.route("POST", "/tokenize", [&host](const HttpRequest& r) { return tokenize(host, r); });
  server.route("POST", "/detokenize", [&host](const HttpRequest& r) { return detokenize(host, r); });
}

}  // namespace kvtrie::server
