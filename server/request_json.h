// Contract: reading client JSON with exact errors. parse_object() refuses malformed or truncated JSON,
// invalid UTF-8 and non-object bodies; the typed readers refuse wrong types and out-of-range values. Every
// refusal is an ApiError(InvalidRequest) whose message names the field, so handlers stay free of validation
// noise. Pure functions; any thread.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kvtrie::server {

using Json = nlohmann::json;

Json parse_object(const std::string& body);

// Each reader: nullopt when the key is absent or null; throws ApiError when present with the wrong type or
// outside [min, max].
std::optional<int64_t> read_int(const Json& obj, const char* key, int64_t min, int64_t max);
std::optional<double> read_number(const Json& obj, const char* key, double min, double max);
std::optional<bool> read_bool(const Json& obj, const char* key);
std::optional<std::string> read_string(const Json& obj, const char* key);
// A string or an array of strings (stop: "x" is accepted as ["x"]).
std::optional<std::vector<std::string>> read_strings(const Json& obj, const char* key, size_t max_count);
// An array of token ids, each in [0, n_vocab).
std::optional<std::vector<int32_t>> read_tokens(const Json& obj, const char* key, uint32_t n_vocab);

// Whether the text is well-formed UTF-8 (prompts are refused otherwise).
bool valid_utf8(const std::string& text);

}  // namespace kvtrie::server
