// Contract: operator endpoints shared by every API mode: GET /metrics (Prometheus text format;
// Access::Metrics), GET /cache (tiers, pages, bytes, trie size; any key) and POST /cache/flush (an admin
// key). /metrics counts requests per tenant: an admin key (or anyone, with --metrics-public) sees every
// tenant, a user key only its own. Handlers run on HTTP worker threads and read the engine's and the
// Authenticator's thread-safe counters; the ModelHost and the Authenticator must outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;
class Authenticator;

void register_admin_api(HttpServer& server, ModelHost& host, const Authenticator& auth);

}  // namespace kvtrie::server
