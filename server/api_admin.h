// Contract: operator endpoints shared by every API mode: GET /metrics (Prometheus text format), GET /cache
// (tiers, pages, bytes, trie size) and POST /cache/flush. Handlers run on HTTP worker threads and read the
// engine's thread-safe counters; the ModelHost must outlive the server.
#pragma once

namespace kvtrie::server {

class HttpServer;
class ModelHost;

void register_admin_api(HttpServer& server, ModelHost& host);

}  // namespace kvtrie::server
