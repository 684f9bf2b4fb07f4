// Contract: POST /tokenize and POST /detokenize, the same in the native and the llama-server API (llama.cpp's
// request and response shapes: {"content", "add_special", "parse_special", "with_pieces"} -> {"tokens"};
// {"tokens"} -> {"content"}). Registers the two routes; handlers run on HTTP worker threads and read the
// ModelHost, which must outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_tokenize_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
