// Contract: the OpenAI-compatible API, served by `kvtrie serve` beside the native API and in llama-server
// mode: POST /v1/chat/completions (the model's chat format, server/chat_template.h), POST /v1/completions
// (both streaming as SSE "data: {...}" events ending with "data: [DONE]", or one JSON object) and GET
// /v1/models. Usage reports prompt_tokens_details.cached_tokens from the prefix cache. Errors carry the
// error JSON of http_types.h ({"error": {"code", "message", "type"}}), which OpenAI's client libraries read.
// Handlers run on HTTP worker threads; the ModelHost must outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_openai_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
