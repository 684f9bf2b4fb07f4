// Contract: the HTTP listener (the only user of cpp-httplib; the library stays behind the Impl). Register
// every route with route() before start(); registration is not thread-safe. start() binds and serves from a
// pool of worker threads; handlers run on those threads concurrently. A handler sees the raw body whatever
// the Content-Type (a form-encoded body is not parsed as a form). Requests to an unknown path get 404, a
// known path with another method 405, bodies over max_body_bytes 413 (naming the limit), multipart bodies
// 415, all with the error JSON. stop() closes the listener and joins the workers once their responses end
// (begin_shutdown() first makes every stream's should_stop() true, to cut streams short); the destructor
// calls it. The handlers (and whatever they capture) must outlive the HttpServer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace kvtrie::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback by default: exposing the daemon is an explicit choice
  uint16_t port = 11435;
  size_t threads = 32;  // concurrent connections served (a streaming client holds one)
  size_t max_body_bytes = 8u << 20;  // whatever the Content-Type: bodies are read as bytes, never as forms
  std::string body_limit_hint = "raise it with --max-body-mb";  // ends the 413 message: what sets the limit
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void route(const std::string& method, const std::string& path, Handler handler);

  // Binds host:port and starts serving in the background. Returns false (with `error` set) when the address
  // cannot be bound.
  bool start(std::string& error);
  // Streams see should_stop() from now on (shutdown began); the listener keeps running until stop().
  void begin_shutdown();
  void stop();
  // Streaming responses not yet finished (the daemon waits for these to drain before stop()).
  int open_streams() const;
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtrie::server
