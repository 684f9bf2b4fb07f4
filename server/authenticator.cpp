#include "server/authenticator.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace kvtrie::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The key the client presented: `Authorization: Bearer KEY` (the scheme in any case, as RFC 9110 says), else
// `x-api-key: KEY` (Anthropic-style clients). Header names are matched in any case too.
std::optional<std::string_view> presented_key(const HttpRequest& request) {
  std::optional<std::string_view> x_api_key;
  for (const auto& [name, value] : request.headers) {
    if (iequals(name, "authorization")) {
      const std::string_view v = trim(value);
      if (v.size() > 7 && iequals(v.substr(0, 7), "bearer ")) return trim(v.substr(7));
    } else if (iequals(name, "x-api-key")) {
      x_api_key = trim(value);
    }
  }
  return x_api_key;
}

uint64_t random_nonzero() {
  uint64_t v = 0;
  while (v == 0)
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof v) != 1)
      throw std::runtime_error("RAND_bytes failed");
  return v;
}

}  // namespace

Authenticator::Authenticator(AuthOptions options)
    : options_(std::move(options)),
      // An empty value (KVTRIE_API_KEY= in an environment file) is no key, as in keys_from_values().
      enabled_(!keys_from_values(options_.api_keys).empty() || !options_.api_key_file.empty()),
      table_(std::make_shared<Table>()) {}

uint64_t Authenticator::salt_for(const std::string& tenant) {
  // Random and kept in memory only: a client cannot compute it, so it cannot aim a namespace hash at another
  // tenant's (the namespace hash is not collision-resistant against someone who knows its inputs).
  auto [it, inserted] = salts_.try_emplace(tenant, 0);
  if (inserted) it->second = random_nonzero();
  return it->second;
}

bool Authenticator::reload(std::string& message) {
  std::vector<ApiKey> keys;
  if (!options_.api_key_file.empty()) {
    auto read = read_key_file(options_.api_key_file);
    if (auto* err = std::get_if<std::string>(&read)) {
      message = *err + "; the keys in force are kept";
      return false;
    }
    keys = std::move(std::get<std::vector<ApiKey>>(read));
  }
  for (auto& k : keys_from_values(options_.api_keys))
    if (!find_key(keys, k.digest)) keys.push_back(std::move(k));  // the file's line for the same key wins

  auto table = std::make_shared<Table>();
  size_t admins = 0;
  std::lock_guard lock(mutex_);
  for (const auto& k : keys) {
    table->salts.push_back(salt_for(k.tenant));
    admins += k.admin ? 1 : 0;
  }
  std::vector<std::string> tenants;
  for (const auto& k : keys) tenants.push_back(k.tenant);
  std::sort(tenants.begin(), tenants.end());
  tenants.erase(std::unique(tenants.begin(), tenants.end()), tenants.end());
  table->keys = std::move(keys);
  message = std::to_string(table->keys.size()) + " API key(s) (" + std::to_string(admins) + " admin) for " +
            std::to_string(tenants.size()) + " tenant(s)";
  if (enabled_ && table->keys.empty()) message += ": no request but /health is accepted";
  table_ = std::move(table);
  return true;
}

std::optional<HttpResponse> Authenticator::admit(HttpRequest& request, Access access) {
  if (!enabled_ || access == Access::Public || (access == Access::Metrics && options_.metrics_public))
    return std::nullopt;
  std::shared_ptr<const Table> table;
  {
    std::lock_guard lock(mutex_);
    table = table_;
  }
  const std::optional<std::string_view> key = presented_key(request);
  // The messages never quote what the client sent: it may be someone's key with a typo.
  std::optional<size_t> at;
  if (key && !key->empty()) at = find_key(table->keys, digest_of(*key));
  if (!at) {
    ++refused_;
    return error_response(ErrorType::Unauthorized,
                          key ? "invalid API key"
                              : "this endpoint needs an API key: send \"Authorization: Bearer KEY\" or "
                                "\"x-api-key: KEY\"");
  }
  const ApiKey& k = table->keys[*at];
  if (access == Access::Admin && !k.admin) {
    ++refused_;
    return error_response(ErrorType::Forbidden, request.path + " needs an admin API key");
  }
  request.caller = Caller{k.tenant, table->salts[*at], k.admin};
  std::lock_guard lock(mutex_);
  ++requests_[k.tenant];
  return std::nullopt;
}

std::map<std::string, uint64_t> Authenticator::tenant_requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

}  // namespace kvtrie::server
