#include "server/http_types.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace kvtrie::server {

namespace {

struct ErrorRow {
  ErrorType type;
  int status;
  const char* name;
};

// The one table from error type to HTTP status and the "type" string of the error JSON.
constexpr ErrorRow kErrorTable[] = {
    {ErrorType::InvalidRequest, 400, "invalid_request_error"},
    {ErrorType::NotFound, 404, "not_found_error"},
    {ErrorType::Unauthorized, 401, "authentication_error"},
    {ErrorType::Forbidden, 403, "permission_error"},
    {ErrorType::MethodNotAllowed, 405, "method_not_allowed_error"},
    {ErrorType::PayloadTooLarge, 413, "payload_too_large_error"},
    {ErrorType::UnsupportedMediaType, 415, "unsupported_media_type_error"},
    {ErrorType::Unavailable, 503, "unavailable_error"},
    {ErrorType::Overloaded, 503, "overloaded_error"},
    {ErrorType::NotImplemented, 501, "not_supported_error"},
    {ErrorType::Internal, 500, "server_error"},
};

const ErrorRow& row_of(ErrorType type) {
  for (const auto& row : kErrorTable)
    if (row.type == type) return row;
  return kErrorTable[std::size(kErrorTable) - 1];
}

}  // namespace

int status_of(ErrorType type) {
  return row_of(type).status;
}
const char* type_name(ErrorType type) {
  return row_of(type).name;
}

void throw_invalid(const std::string& message) {
  throw ApiError(ErrorType::InvalidRequest, message);
}

HttpResponse HttpResponse::json(const nlohmann::json& value, int status) {
  HttpResponse r;
  r.status = status;
  // Replace rather than throw on invalid UTF-8 that slipped into generated text.
  r.body = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpResponse HttpResponse::text(std::string text, std::string content_type, int status) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(text);
  r.content_type = std::move(content_type);
  return r;
}

HttpResponse HttpResponse::streaming(std::shared_ptr<StreamBody> stream, std::string content_type) {
  HttpResponse r;
  r.stream = std::move(stream);
  r.content_type = std::move(content_type);
  return r;
}

HttpResponse error_response(ErrorType type, const std::string& message, std::optional<int> retry_after_s) {
  nlohmann::json body = {
      {"error", {{"code", status_of(type)}, {"message", message}, {"type", type_name(type)}}}};
  HttpResponse r = HttpResponse::json(body, status_of(type));
  if (retry_after_s) r.headers.emplace_back("Retry-After", std::to_string(*retry_after_s));
  if (type == ErrorType::Unauthorized) r.headers.emplace_back("WWW-Authenticate", "Bearer");  // RFC 6750
  return r;
}

HttpResponse invoke_guarded(const Handler& handler, const HttpRequest& request) {
  try {
    return handler(request);
  } catch (const ApiError& e) {
    spdlog::debug("{} {}: {} ({})", request.method, request.path, status_of(e.type()), e.what());
    return error_response(e.type(), e.what(), e.retry_after_s());
  } catch (const nlohmann::json::exception& e) {
    // A type mismatch that slipped past the field readers is still the client's bad input.
    return error_response(ErrorType::InvalidRequest, std::string("invalid request: ") + e.what());
  } catch (const std::exception& e) {
    spdlog::error("{} {}: internal error: {}", request.method, request.path, e.what());
    return error_response(ErrorType::Internal, e.what());
  } catch (...) {
    spdlog::error("{} {}: internal error of unknown type", request.method, request.path);
    return error_response(ErrorType::Internal, "internal error");
  }
}

}  // namespace kvtrie::server
