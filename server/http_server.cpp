#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace kvtrie::server {

namespace {
// Why a request body could not be taken in (read_body).
enum class BodyProblem { None, TooLarge, Multipart, Unreadable };
}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  std::unique_ptr<httplib::Server> owned;  // an httplib::SSLServer when TLS is configured
  httplib::Server& server;
  Gate gate;
  std::map<std::string, std::set<std::string>> methods_by_path;  // for 405 and the Allow header
  std::atomic<int> open_streams{0};
  std::thread listener;
  std::atomic<bool> listener_done{false};
  int bound_port = 0;
  int listen_socket = -1;  // captured by the socket-options hook, for raise_backlog()

  // 404, or 405 with the Allow header when the path exists under other methods.
  HttpResponse no_route(const std::string& method, const std::string& path) const;
  // 413 naming the real limit and what sets it; `declared` is the Content-Length when the client sent one.
  HttpResponse too_large(const std::string& declared) const;
  // The answer to a body read_body() could not take in.
  HttpResponse refused(BodyProblem problem, const httplib::Request& req) const;
  // The gate's answer for a caller it refuses; nullopt when admitted (or when there is no gate).
  std::optional<HttpResponse> admit(HttpRequest& request, Access access) const {
    return gate ? gate(request, access) : std::nullopt;
  }

  explicit Impl(HttpServerOptions o) : options(std::move(o)), owned(make_server(options)), server(*owned) {}
  static std::unique_ptr<httplib::Server> make_server(const HttpServerOptions& o) {
    if (o.tls_cert_file.empty()) return std::make_unique<httplib::Server>();
    return std::make_unique<httplib::SSLServer>(o.tls_cert_file.c_str(), o.tls_key_file.c_str());
  }
  bool tls() const { return !options.tls_cert_file.empty(); }
};

namespace {

HttpRequest to_request(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  for (const auto& [k, v] : req.headers) r.headers.emplace(k, v);
  return r;
}

// Counts a streaming response from its start until the response (and its provider) is destroyed.
struct StreamGuard {
  explicit StreamGuard(std::atomic<int>& n) : count(n) { ++count; }
  ~StreamGuard() { --count; }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  std::atomic<int>& count;
};

void apply(const HttpResponse& from, httplib::Response& to, std::atomic<int>& open_streams) {
  to.status = from.status;
  for (const auto& [k, v] : from.headers) to.set_header(k, v);
  if (!from.stream) {
    to.set_content(from.body, from.content_type);
    return;
  }
  std::shared_ptr<StreamBody> stream = from.stream;
  auto guard = std::make_shared<StreamGuard>(open_streams);
  // The provider (and with it the stream, and the generation it reads) is destroyed with the response,
  // whether the body completed or the client went away.
  to.set_chunked_content_provider(from.content_type, [stream, guard](size_t, httplib::DataSink& sink) {
    ShouldStop should_stop = [&] { return !sink.is_writable(); };
    std::string piece;
    bool more = stream->next(piece, should_stop);
    if (!piece.empty() && !sink.write(piece.data(), piece.size())) return false;  // client gone
    if (!more) sink.done();
    return true;
  });
}

// Reads the whole body through httplib's content reader. Routes registered with a content reader bypass the
// library's own body handling, which (in the packaged 0.11.4, Server::read_content) parses any body sent as
// application/x-www-form-urlencoded (what `curl -d`, Python's urllib and many clients send by default) as a
// form and answers 413 before any handler runs when it is over 8,192 bytes (CPPHTTPLIB_FORM_URL_ENCODED_
// PAYLOAD_MAX_LENGTH, compiled into the library). Here every Content-Type arrives as the same raw bytes, and
// the one limit is max_bytes: the library refuses a Content-Length over it (res.status 413, the body skipped)
// and our receiver refuses a chunked or unsized body that grows past it.
//
// A refused chunked body is still read to its end (up to kDrainBytes more) and thrown away: closing the
// socket with the client's unread bytes in its receive queue makes the kernel send a reset, and the reset
// reached the client before it had read our 413 (seen as a missing response under load, about one time in
// fifty). Past kDrainBytes the connection is closed anyway; the 413 then arrives only by luck.
constexpr size_t kDrainBytes = size_t{16} << 20;

BodyProblem read_body(const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader, size_t max_bytes, std::string& body) {
  // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112, 6.3). The library
  // reads such a body until the connection ends and answered 400 (`curl -X POST .../cache/flush` at once, a
  // client that keeps the connection open after the 30 s read timeout).
  std::string encoding = req.get_header_value("Transfer-Encoding");
  for (char& c : encoding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!req.has_header("Content-Length") && encoding.find("chunked") == std::string::npos)
    return BodyProblem::None;
  bool over_limit = false;
  if (req.is_multipart_form_data()) {
    // Drained (and counted) so that the connection stays in step, then refused: our bodies are JSON.
    size_t total = 0;
    const bool ok = reader([](const httplib::MultipartFormData&) { return true; },
                           [&](const char*, size_t n) {
                             total += n;
                             over_limit = total > max_bytes;
                             return total - std::min(total, max_bytes) <= kDrainBytes;
                           });
    if (over_limit || res.status == 413) return BodyProblem::TooLarge;
    return ok ? BodyProblem::Multipart : BodyProblem::Unreadable;
  }
  size_t drained = 0;
  const bool ok = reader([&](const char* data, size_t n) {
    if (!over_limit && body.size() + n > max_bytes) {
      over_limit = true;
      std::string().swap(body);
    }
    if (over_limit) {
      drained += n;
      return drained <= kDrainBytes;
    }
    body.append(data, n);
    return true;
  });
  if (over_limit || res.status == 413) return BodyProblem::TooLarge;
  return ok ? BodyProblem::None : BodyProblem::Unreadable;
}

// The packaged httplib is a compiled library that listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG in
// our translation unit does not reach it). A burst of more simultaneous connects then overflows the accept
// queue: the overflowing clients wait for a SYN retransmit and, measured with 64 at once, many of them get
// their connection reset. Calling listen() again on the bound socket raises the backlog (Linux updates it in
// place).
constexpr int kListenBacklog = 1024;

bool raise_backlog(int listen_socket) {
  return listen_socket >= 0 && ::listen(listen_socket, kListenBacklog) == 0;
}

}  // namespace

HttpResponse HttpServer::Impl::no_route(const std::string& method, const std::string& path) const {
  auto it = methods_by_path.find(path);
  if (it == methods_by_path.end())
    return error_response(ErrorType::NotFound, "no endpoint " + method + " " + path);
  std::string allow;
  for (const auto& m : it->second) allow += (allow.empty() ? "" : ", ") + m;
  HttpResponse err = error_response(ErrorType::MethodNotAllowed, "method " + method + " is not allowed on " +
                                                                     path + " (allowed: " + allow + ")");
  err.headers.emplace_back("Allow", allow);
  return err;
}

HttpResponse HttpServer::Impl::too_large(const std::string& declared) const {
  const size_t limit = options.max_body_bytes;
  std::string limit_text = std::to_string(limit) + " bytes";
  if (limit % (1u << 20) == 0) limit_text = std::to_string(limit >> 20) + " MiB (" + limit_text + ")";
  const std::string size =
      declared.empty() ? "the request body" : "the request body (" + declared + " bytes)";
  HttpResponse err = error_response(ErrorType::PayloadTooLarge, size + " is over the limit of " + limit_text +
                                                                    "; " + options.body_limit_hint);
  // What is left of a refused chunked body may still be in flight: this connection cannot carry another
  // request.
  err.headers.emplace_back("Connection", "close");
  return err;
}

HttpResponse HttpServer::Impl::refused(BodyProblem problem, const httplib::Request& req) const {
  switch (problem) {
    case BodyProblem::TooLarge:
      return too_large(req.get_header_value("Content-Length"));
    case BodyProblem::Multipart:
      return error_response(
          ErrorType::UnsupportedMediaType,
          "multipart/form-data bodies are not accepted: send the JSON object itself as the body");
    case BodyProblem::Unreadable:
    case BodyProblem::None:
      break;
  }
  HttpResponse err = error_response(ErrorType::InvalidRequest,
                                    "the request body could not be read (truncated or malformed chunked "
                                    "encoding, or an unsupported Content-Encoding)");
  err.headers.emplace_back("Connection", "close");
  return err;
}

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  auto& svr = impl_->server;
  size_t threads = impl_->options.threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_payload_max_length(impl_->options.max_body_bytes);
  svr.set_keep_alive_timeout(2);  // bounds how long an idle keep-alive connection delays shutdown
  svr.set_read_timeout(30, 0);
  svr.set_write_timeout(30, 0);
  Impl* impl = impl_.get();
  svr.set_socket_options([impl](socket_t sock) {
    httplib::default_socket_options(sock);  // SO_REUSEADDR, as before
    impl->listen_socket = sock;
  });
  // Every failure httplib detects itself (no route for GET, bad request line) and every error our handlers
  // answered without a body ends here, so all of them carry the same error JSON.
  httplib::Server::HandlerWithResponse on_error = [impl](const httplib::Request& req,
                                                         httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    HttpResponse err;
    if (res.status == 404) {
      err = impl->no_route(req.method, req.path);
    } else if (res.status == 413) {
      err = impl->too_large(req.get_header_value("Content-Length"));
    } else {
      err = error_response(ErrorType::InvalidRequest, "bad request");
      err.status = res.status;
      err.body = nlohmann::json{{"error",
                                 {{"code", res.status},
                                  {"message", "bad request"},
                                  {"type", type_name(ErrorType::InvalidRequest)}}}}
                     .dump();
    }
    apply(err, res, impl->open_streams);
    return httplib::Server::HandlerResponse::Handled;
  };
  svr.set_error_handler(on_error);
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    // Handlers are wrapped by invoke_guarded and never throw; this is the last line of defence.
    res.status = 500;
    res.set_content(R"({"error":{"code":500,"message":"internal error","type":"server_error"}})",
                    "application/json");
  });
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::set_gate(Gate gate) {
  impl_->gate = std::move(gate);
}

void HttpServer::route(const std::string& method, const std::string& path, Handler handler, Access access) {
  impl_->methods_by_path[path].insert(method);
  Impl* impl = impl_.get();
  // Paths are matched literally: escape regex metacharacters (only '.' occurs in ours).
  std::string pattern;
  for (char c : path) {
    if (c == '.') pattern += '\\';
    pattern += c;
  }
  auto& svr = impl_->server;
  if (method == "GET" || method == "OPTIONS") {
    auto fn = [impl, access, handler = std::move(handler)](const httplib::Request& req,
                                                           httplib::Response& res) {
      HttpRequest request = to_request(req);
      std::optional<HttpResponse> denied = impl->admit(request, access);
      apply(denied ? *denied : invoke_guarded(handler, request), res, impl->open_streams);
    };
    if (method == "GET")
      svr.Get(pattern, fn);
    else
      svr.Options(pattern, fn);
    return;
  }
  // Methods with a body take it through a content reader (read_body says why). A refused caller's body is
  // still read, and thrown away, so that the connection stays in step (read_body's comment on resets).
  auto fn = [impl, access, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                         const httplib::ContentReader& reader) {
    HttpRequest request = to_request(req);
    std::optional<HttpResponse> denied = impl->admit(request, access);
    const BodyProblem problem = read_body(req, res, reader, impl->options.max_body_bytes, request.body);
    if (denied) {
      if (problem != BodyProblem::None) denied->headers.emplace_back("Connection", "close");
      apply(*denied, res, impl->open_streams);
      return;
    }
    apply(problem == BodyProblem::None ? invoke_guarded(handler, request) : impl->refused(problem, req), res,
          impl->open_streams);
  };
  if (method == "POST")
    svr.Post(pattern, fn);
  else if (method == "PUT")
    svr.Put(pattern, fn);
  else if (method == "DELETE")
    svr.Delete(pattern, fn);
  else if (method == "PATCH")
    svr.Patch(pattern, fn);
}

bool HttpServer::start(std::string& error) {
  auto& o = impl_->options;
  if (!impl_->server.is_valid()) {
    // SSLServer loads both files in its constructor; what OpenSSL said is in its error queue, not ours.
    error = "cannot load the TLS certificate " + o.tls_cert_file + " or its private key " + o.tls_key_file +
            " (PEM files that belong together are needed)";
    return false;
  }
  // Last in each method's list (handlers match in registration order): a body sent to no route is read
  // through our reader too, so it gets its 404 or 405 (or a truthful 413), never the library's form-body 413.
  Impl* impl = impl_.get();
  auto no_route = [impl](const httplib::Request& req, httplib::Response& res,
                         const httplib::ContentReader& reader) {
    std::string discarded;
    const BodyProblem problem = read_body(req, res, reader, impl->options.max_body_bytes, discarded);
    apply(problem == BodyProblem::TooLarge ? impl->too_large(req.get_header_value("Content-Length"))
                                           : impl->no_route(req.method, req.path),
          res, impl->open_streams);
  };
  impl_->server.Post(".*", no_route).Put(".*", no_route).Patch(".*", no_route).Delete(".*", no_route);
  int port = o.port;
  bool ok = o.port == 0 ? (port = impl_->server.bind_to_any_port(o.host)) > 0
                        : impl_->server.bind_to_port(o.host, o.port);
  if (!ok) {
    error = "cannot listen on " + o.host + ":" + std::to_string(o.port) + " (address in use or not local?)";
    return false;
  }
  impl_->bound_port = port;
  if (!raise_backlog(impl_->listen_socket))
    spdlog::warn("could not raise the listen backlog ({}); a burst of connects may be refused",
                 std::strerror(errno));
  impl_->listener = std::thread([impl = impl_.get()] {
    impl->server.listen_after_bind();
    impl->listener_done = true;
  });
  // httplib's stop() does nothing until the listener thread has marked the server running: a stop() that
  // came first (a SIGTERM right after start-up) left the thread accepting forever and the daemon hung.
  while (!impl_->server.is_running() && !impl_->listener_done)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

int HttpServer::open_streams() const {
  return impl_->open_streams.load();
}

void HttpServer::stop() {
  if (!impl_) return;
  if (impl_->listener.joinable()) {
    impl_->server.stop();
    impl_->listener.join();
  }
}

uint16_t HttpServer::port() const {
  return static_cast<uint16_t>(impl_->bound_port);
}

bool HttpServer::tls() const {
  return impl_->tls();
}

}  // namespace kvtrie::server
