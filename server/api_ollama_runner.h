// Contract: older Ollama's runner protocol (up to v0.24; SPEC 5), served by `kvtrie runner`: GET /health with
// an integer status and a progress, POST /load (Operation fit/alloc/commit/close; the model given on the
// command line is loaded at start, so these only report), and POST /completion with Ollama's capitalised
// keys, answering NDJSON with nanosecond durations. Handlers run on HTTP worker threads; the ModelHost must
// outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_ollama_runner_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
