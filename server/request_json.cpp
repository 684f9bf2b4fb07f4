#include "server/request_json.h"

#include <cmath>

#include "runner/tokenizer/utf8.h"
#include "server/http_types.h"

namespace kvtrie::server {

namespace {

const char* kind_of(const Json& v) {
  return v.type_name();
}

[[noreturn]] void wrong_type(const char* key, const char* want, const Json& v) {
  throw_invalid(std::string("\"") + key + "\" must be " + want + ", not " + kind_of(v));
}

const Json* present(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

bool valid_utf8(const std::string& text) {
  return utf8::is_valid(text);
}

Json parse_object(const std::string& body) {
  if (body.empty()) throw_invalid("the request body is empty; expected a JSON object");
  if (!valid_utf8(body)) throw_invalid("the request body is not valid UTF-8");
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw_invalid("the request body is not valid JSON (malformed or truncated)");
  if (!j.is_object()) throw_invalid(std::string("the request body must be a JSON object, not ") + kind_of(j));
  return j;
}

std::optional<int64_t> read_int(const Json& obj, const char* key, int64_t min, int64_t max) {
  const Json* v = present(obj, key);
  if (!v) return std::nullopt;
  int64_t x;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw_invalid(std::string("\"") + key + "\" is out of range");
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             v->get<double>() == std::floor(v->get<double>()) && std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());  // 5.0 is an integer in JSON's eyes
  } else {
    wrong_type(key, "an integer", *v);
  }
  if (x < min || x > max)
    throw_invalid(std::string("\"") + key + "\" must be between " + std::to_string(min) + " and " +
                  std::to_string(max) + ", got " + std::to_string(x));
  return x;
}

std::optional<double> read_number(const Json& obj, const char* key, double min, double max) {
  const Json* v = present(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max)
    throw_invalid(std::string("\"") + key + "\" must be between " + std::to_string(min) + " and " +
                  std::to_string(max));
  return x;
}

std::optional<bool> read_bool(const Json& obj, const char* key) {
  const Json* v = present(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> read_string(const Json& obj, const char* key) {
  const Json* v = present(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> read_strings(const Json& obj, const char* key, size_t max_count) {
  const Json* v = present(obj, key);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& e : *v) {
      if (!e.is_string()) throw_invalid(std::string("\"") + key + "\" must be an array of strings");
      out.push_back(e.get<std::string>());
    }
  } else {
    wrong_type(key, "a string or an array of strings", *v);
  }
  if (out.size() > max_count)
    throw_invalid(std::string("\"") + key + "\" has more than " + std::to_string(max_count) + " entries");
  for (const auto& s : out)
    if (s.empty()) throw_invalid(std::string("\"") + key + "\" must not contain empty strings");
  return out;
}

std::optional<std::vector<int32_t>> read_tokens(const Json& obj, const char* key, uint32_t n_vocab) {
  const Json* v = present(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_array()) wrong_type(key, "an array of token ids", *v);
  std::vector<int32_t> out;
  out.reserve(v->size());
  for (const auto& e : *v) {
    if (!e.is_number_integer())
      throw_invalid(std::string("\"") + key + "\" must hold only integer token ids");
    int64_t id = e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                     ? -1
                     : e.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(n_vocab))
      throw_invalid("token id " + e.dump() + " in \"" + key + "\" is outside the vocabulary (0.." +
                    std::to_string(n_vocab - 1) + ")");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace kvtrie::server
