// Contract: the llama-server compatible API, so Ollama can run kvtrie as its runner (SPEC 5): GET /health,
// POST /completion (SSE "data: {...}" lines when streaming), /tokenize and /detokenize (api_tokenize.h),
// GET /props and POST /apply-template. The daemon adds the OpenAI API (api_openai.h) beside it, as
// llama-server serves /v1/chat/completions. Handlers run on HTTP worker threads; the ModelHost must outlive
// the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_llama_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
