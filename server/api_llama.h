// Contract: the llama-server compatible API, so Ollama can run kvtrie as its runner (SPEC 5): GET /health,
// POST /completion (SSE "data: {...}" lines when streaming), /tokenize and /detokenize (api_tokenize.h),
// GET /props, and through api_chat: /apply-template and /v1/chat/completions. Handlers run on HTTP worker
// threads; the ModelHost must outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_llama_api(HttpServer& server, ModelHost& host);
// Registered by register_llama_api; separate file (api_chat.cpp).
void register_chat_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
