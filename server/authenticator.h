// Contract: the gate in front of every route when the daemon has API keys (--api-key, --api-key-file). It
// owns the key table (digests only), each tenant's cache salt and the per-tenant request counters. admit()
// runs on HTTP worker threads, concurrently with reload() (the main thread, on SIGHUP) and the counters'
// readers; a reload swaps the whole table at once, so a request sees either the old keys or the new ones, and
// requests already admitted (open streams) are not affected. A tenant keeps its salt across reloads for the
// daemon's lifetime: its cached prefixes stay its own. Keys never leave this class: not in messages, logs or
// counters.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/api_keys.h"
#include "server/http_types.h"

namespace kvtrie::server {

struct AuthOptions {
  std::vector<std::string> api_keys;  // user keys, each its own tenant
  std::string api_key_file;           // "": none
  bool metrics_public = false;        // /metrics open to anyone
};

class Authenticator {
 public:
  explicit Authenticator(AuthOptions options);
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  // (Re)reads the key file and installs the keys of both sources. On failure (unreadable or malformed file)
  // the keys in force stay and `message` says why; on success `message` summarises what is in force.
  bool reload(std::string& message);

  // True when keys were configured at start: then every route but the Public ones needs a key, even once a
  // reload has left no key at all (closed, not open, is what a mistake in the key file gives).
  bool enabled() const { return enabled_; }
  bool has_key_file() const { return !options_.api_key_file.empty(); }

  // nullopt: admitted, with request.caller filled in (tenant, salt, admin). Otherwise the answer to send: 401
  // without a key or with an unknown one, 403 for a user key on an Admin route.
  std::optional<HttpResponse> admit(HttpRequest& request, Access access);

  // Requests admitted per tenant since start (tenants with at least one).
  std::map<std::string, uint64_t> tenant_requests() const;
  uint64_t refused() const { return refused_.load(); }

 private:
  struct Table {
    std::vector<ApiKey> keys;
    std::vector<uint64_t> salts;  // salts[i]: the salt of keys[i]'s tenant
  };
  uint64_t salt_for(const std::string& tenant);  // mutex_ held

  const AuthOptions options_;
  const bool enabled_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Table> table_;        // replaced whole by reload()
  std::map<std::string, uint64_t> salts_;     // tenant -> salt, never forgotten
  std::map<std::string, uint64_t> requests_;  // tenant -> requests admitted
  std::atomic<uint64_t> refused_{0};
};

}  // namespace kvtrie::server
