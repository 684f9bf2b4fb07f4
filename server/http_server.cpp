#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace kvtrie::server {

struct HttpServer::Impl {
  HttpServerOptions options;
  httplib::Server server;
  std::map<std::string, std::set<std::string>> methods_by_path;  // for 405 and the Allow header
  std::atomic<bool> stopping{false};
  std::atomic<int> open_streams{0};
  std::thread listener;
  std::atomic<bool> listener_done{false};
  int bound_port = 0;
  int listen_socket = -1;  // captured by the socket-options hook, for raise_backlog()
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

void apply(const HttpResponse& from, httplib::Response& to, const std::atomic<bool>& stopping,
           std::atomic<int>& open_streams) {
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
  to.set_chunked_content_provider(from.content_type, [stream, guard, &stopping](size_t, httplib::DataSink& sink) {
    ShouldStop should_stop = [&] { return stopping.load() || !sink.is_writable(); };
    std::string piece;
    bool more = stream->next(piece, should_stop);
    if (!piece.empty() && !sink.write(piece.data(), piece.size())) return false;  // client gone
    if (!more) sink.done();
    return true;
  });
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

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
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
  // Every failure httplib detects itself (no route, body too large, bad request line) and every error our
  // handlers answered without a body ends here, so all of them carry the same error JSON.
  httplib::Server::HandlerWithResponse on_error = [impl](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    HttpResponse err;
    if (res.status == 404) {
      auto it = impl->methods_by_path.find(req.path);
      if (it != impl->methods_by_path.end()) {
        std::string allow;
        for (const auto& m : it->second) allow += (allow.empty() ? "" : ", ") + m;
        err = error_response(ErrorType::MethodNotAllowed, "method " + req.method + " is not allowed on " +
                                                              req.path + " (allowed: " + allow + ")");
        err.headers.emplace_back("Allow", allow);
      } else {
        err = error_response(ErrorType::NotFound, "no endpoint " + req.method + " " + req.path);
      }
    } else if (res.status == 413) {
      err = error_response(ErrorType::PayloadTooLarge, "request body exceeds " +
                                                           std::to_string(impl->options.max_body_bytes) + " bytes");
    } else {
      err = error_response(ErrorType::InvalidRequest, "bad request");
      err.status = res.status;
      err.body = nlohmann::json{{"error", {{"code", res.status}, {"message", "bad request"},
                                           {"type", type_name(ErrorType::InvalidRequest)}}}}.dump();
    }
    apply(err, res, impl->stopping, impl->open_streams);
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

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(const std::string& method, const std::string& path, Handler handler) {
  impl_->methods_by_path[path].insert(method);
  Impl* impl = impl_.get();
  auto fn = [impl, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    HttpResponse r = invoke_guarded(handler, to_request(req));
    apply(r, res, impl->stopping, impl->open_streams);
  };
  // Paths are matched literally: escape regex metacharacters (only '.' occurs in ours).
  std::string pattern;
  for (char c : path) {
    if (c == '.') pattern += '\\';
    pattern += c;
  }
  auto& svr = impl_->server;
  if (method == "GET") svr.Get(pattern, fn);
  else if (method == "POST") svr.Post(pattern, fn);
  else if (method == "PUT") svr.Put(pattern, fn);
  else if (method == "DELETE") svr.Delete(pattern, fn);
  else if (method == "PATCH") svr.Patch(pattern, fn);
  else if (method == "OPTIONS") svr.Options(pattern, fn);
}

bool HttpServer::start(std::string& error) {
  auto& o = impl_->options;
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

void HttpServer::begin_shutdown() { impl_->stopping = true; }

int HttpServer::open_streams() const { return impl_->open_streams.load(); }

void HttpServer::stop() {
  if (!impl_) return;
  if (impl_->listener.joinable()) {
    impl_->server.stop();
    impl_->listener.join();
  }
}

uint16_t HttpServer::port() const { return static_cast<uint16_t>(impl_->bound_port); }

}  // namespace kvtrie::server
