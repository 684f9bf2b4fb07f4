// Contract: the HTTP listener (the only user of cpp-httplib; the library stays behind the Impl), over plain
// HTTP or, given a certificate and key, HTTPS only. Register every route with route() (and the gate with
// set_gate()) before start(); registration is not thread-safe. Each route states who may call it (Access);
// the gate sees every request to a known route before its handler and either fills in the caller or answers
// for it (401/403), the body then read and discarded. start() binds and serves from a
// pool of worker threads; handlers run on those threads concurrently. A handler sees the raw body whatever
// the Content-Type (a form-encoded body is not parsed as a form). Requests to an unknown path get 404, a
// known path with another method 405, bodies over max_body_bytes 413 (naming the limit), multipart bodies
// 415, all with the error JSON. stop() closes the listener and joins the workers once their responses end
// (a stream ends when its generation does, or when its client goes away); the destructor calls it. The
// handlers (and whatever they capture) must outlive the HttpServer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http_types.h"

namespace kvtrie::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback by default: exposing the daemon is an explicit choice
  uint16_t port = 11435;
  size_t threads = 32;               // concurrent connections served (a streaming client holds one)
  size_t max_body_bytes = 8u << 20;  // whatever the Content-Type: bodies are read as bytes, never as forms
  std::string body_limit_hint = "raise it with --max-body-mb";  // ends the 413 message: what sets the limit
  std::string
      tls_cert_file;  // PEM certificate (chain) and private key: both set, the server speaks only HTTPS
  std::string tls_key_file;
};

// Admits a request to a route with the given Access (nullopt, having filled request.caller) or answers it.
using Gate = std::function<std::optional<HttpResponse>(HttpRequest& request, Access access)>;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void route(const std::string& method, const std::string& path, Handler handler,
             Access access = Access::User);
  // Without a gate every request is admitted (with an empty Caller).
  void set_gate(Gate gate);

  // Binds host:port and starts serving in the background. Returns false (with `error` set) when the address
  // cannot be bound or the TLS certificate or key cannot be loaded.
  bool start(std::string& error);
  void stop();
  // Streaming responses not yet finished (the daemon waits for these to drain before stop()).
  int open_streams() const;
  uint16_t port() const;
  bool tls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtrie::server
