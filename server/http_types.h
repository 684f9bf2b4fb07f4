// Contract: the HTTP vocabulary the API handlers speak, independent of the HTTP library (which only
// http_server.cpp includes). A Handler maps an HttpRequest to an HttpResponse and signals failure only by
// throwing ApiError (or, for bugs, anything else); the wrapper installed at registration turns exceptions
// into the error JSON {"error": {"code", "message", "type"}} through the one ErrorType -> status table below.
// A streaming response is a pull generator (StreamBody::next); the server calls it from the connection's
// thread until it returns false or the client goes away, then destroys it (which cancels any generation it
// holds). Plain values; no thread affinity.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvtrie::server {

enum class ErrorType {
  InvalidRequest,        // 400: malformed JSON, wrong types, out-of-range values, bad prompts
  NotFound,              // 404: unknown endpoint
  Unauthorized,          // 401 + WWW-Authenticate: no API key, or one the daemon does not know
  Forbidden,             // 403: a valid key without the right (a user key on an admin endpoint)
  MethodNotAllowed,      // 405
  PayloadTooLarge,       // 413
  UnsupportedMediaType,  // 415: a multipart body where JSON is expected
  Unavailable,           // 503: model still loading, shutting down
  Overloaded,            // 503 + Retry-After: every slot and the queue busy
  NotImplemented,        // 501
  Internal,              // 500: a bug or a driver failure
};

int status_of(ErrorType type);
const char* type_name(ErrorType type);  // "invalid_request_error", "not_found_error", ...

class ApiError : public std::runtime_error {
 public:
  ApiError(ErrorType type, const std::string& message, std::optional<int> retry_after_s = std::nullopt)
      : std::runtime_error(message), type_(type), retry_after_s_(retry_after_s) {}
  ErrorType type() const { return type_; }
  std::optional<int> retry_after_s() const { return retry_after_s_; }

 private:
  ErrorType type_;
  std::optional<int> retry_after_s_;
};

// Shorthand for the common case.
[[noreturn]] void throw_invalid(const std::string& message);

// Who may call a route, checked before its handler runs (when the daemon has API keys; without keys every
// route is open, as before keys existed).
enum class Access {
  Public,   // anyone: /health
  User,     // any valid key: generation, tokenization, model info, cache statistics
  Metrics,  // any valid key, or anyone when the daemon runs with --metrics-public: /metrics
  Admin,    // a key marked admin: /cache/flush (and any future pin/evict)
};

// Who sent a request, as the daemon's API keys establish it (never from the request body). Without keys:
// tenant "" and salt 0, which is the cache namespace every request had before tenants existed.
struct Caller {
  std::string tenant;        // the key's tenant name ("" when unauthenticated); safe to log and report
  uint64_t tenant_salt = 0;  // server-side secret mixed into the cache namespace; never sent to clients
  bool admin = false;
};

struct HttpRequest {
  std::string method;
  std::string path;
  std::string body;
  std::multimap<std::string, std::string> headers;  // names as the client spelled them
  Caller caller;                                    // filled by the server's gate before the handler runs
};

// should_stop() turns true once the client is gone or the server is shutting down.
using ShouldStop = std::function<bool()>;

class StreamBody {
 public:
  virtual ~StreamBody() = default;
  // Produces the next piece of the body into `out`; false when the body is complete (out may still hold a
  // last piece). Blocks until data is ready, polling should_stop().
  virtual bool next(std::string& out, const ShouldStop& should_stop) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<StreamBody> stream;  // when set, the body is streamed (chunked) and `body` is ignored

  static HttpResponse json(const nlohmann::json& value, int status = 200);
  static HttpResponse text(std::string text, std::string content_type, int status = 200);
  static HttpResponse streaming(std::shared_ptr<StreamBody> stream, std::string content_type);
};

// The error JSON for a status and message; what every failure path answers.
HttpResponse error_response(ErrorType type, const std::string& message,
                            std::optional<int> retry_after_s = {});

using Handler = std::function<HttpResponse(const HttpRequest&)>;

// Runs a handler and maps whatever it throws to an error response; never throws.
HttpResponse invoke_guarded(const Handler& handler, const HttpRequest& request);

}  // namespace kvtrie::server
