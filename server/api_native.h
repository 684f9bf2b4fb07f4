// Contract: kvtrie's own HTTP API (SPEC 5, "Native API"): POST /generate (NDJSON streaming or one JSON
// object), POST /tokenize and POST /detokenize (api_tokenize.h), GET /health. Registers its routes on the
// server; handlers run on HTTP worker threads and read the ModelHost, which must outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_native_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
