#include "server/api_admin.h"

#include <sstream>

#include "server/authenticator.h"
#include "server/generate_common.h"
#include "server/http_server.h"

namespace kvtrie::server {

namespace {

class Prometheus {
 public:
  template <typename T>
  void metric(const char* name, const char* type, const char* help, T value, const std::string& labels = "") {
    if (declared_ != name) {
      out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
      declared_ = name;
    }
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::string declared_;
};

Json tier_json(const engine::CacheTierStats& t) {
  return {{"pages_total", t.pages_total},
          {"pages_used", t.pages_used},
          {"bytes_budget", t.bytes_budget},
          {"bytes_used", t.bytes_used},
          {"hit_tokens", t.hit_tokens}};
}

// Requests per tenant (labelled by tenant name, never by key) and the requests refused for want of a key.
// The caller sees the tenants it may: all for an admin key or public metrics (no caller), else its own.
void tenant_metrics(Prometheus& p, const Authenticator& auth, const Caller& caller) {
  if (!auth.enabled()) return;
  p.metric("kvtrie_auth_refused_total", "counter", "Requests refused with 401 or 403", auth.refused());
  // Tenant names are [A-Za-z0-9._-] (valid_tenant_name): nothing to escape in a label.
  for (const auto& [tenant, n] : auth.tenant_requests())
    if (caller.tenant.empty() || caller.admin || caller.tenant == tenant)
      p.metric("kvtrie_tenant_requests_total", "counter",
               "Requests admitted per tenant (all endpoints but /health)", n, "tenant=\"" + tenant + "\"");
}

HttpResponse metrics(ModelHost& host, const Authenticator& auth, const Caller& caller) {
  Prometheus p;
  LoadedModel* model = host.model();
  p.metric("kvtrie_ready", "gauge", "1 once the model is loaded", model ? 1 : 0);
  tenant_metrics(p, auth, caller);
  if (!model) return HttpResponse::text(p.str(), "text/plain; version=0.0.4");
  const engine::EngineCounters c = model->engine->counters();
  const engine::CacheStats s = model->engine->cache_stats();
  p.metric("kvtrie_requests_total", "counter", "Generation requests by outcome", c.requests_completed,
           "result=\"completed\"");
  p.metric("kvtrie_requests_total", "counter", "", c.requests_cancelled, "result=\"cancelled\"");
  p.metric("kvtrie_requests_total", "counter", "", c.requests_rejected, "result=\"rejected\"");
  p.metric("kvtrie_completion_tokens_gpu_greedy_total", "counter",
           "Completion tokens picked by the GPU's argmax (greedy requests without penalties or logprobs)",
           c.completion_tokens_gpu_greedy);
  p.metric(
      "kvtrie_completion_tokens_gpu_top_candidates_total", "counter",
      "Completion tokens drawn from the GPU's best 64 or 128 logits of their row (top-k sampling without "
      "logprobs or a penalty that can raise a logit)",
      c.completion_tokens_gpu_top_candidates);
  p.metric("kvtrie_steps_ahead_total", "counter",
           "Decode steps submitted while the step before ran, fed its greedy tokens on the GPU",
           c.steps_ahead);
  p.metric("kvtrie_requests_preempted_total", "counter",
           "Running requests preempted for KV room (they resume from the cache)", c.requests_preempted);
  p.metric("kvtrie_requests_submitted_total", "counter", "Generation requests accepted",
           c.requests_submitted);
  p.metric("kvtrie_requests_active", "gauge", "Requests holding a slot", c.active);
  p.metric("kvtrie_requests_queued", "gauge", "Requests waiting for a slot", c.queued);
  p.metric("kvtrie_prompt_tokens_total", "counter", "Prompt tokens of finished requests", c.prompt_tokens);
  p.metric("kvtrie_prompt_tokens_computed_total", "counter", "Prompt tokens computed (not from the cache)",
           c.prompt_tokens_computed);
  p.metric("kvtrie_completion_tokens_total", "counter", "Tokens generated", c.completion_tokens);
  p.metric("kvtrie_cache_enabled", "gauge", "1 when the engine has a prefix cache", s.enabled ? 1 : 0);
  p.metric("kvtrie_cache_hit_tokens_total", "counter", "Prompt tokens served from the cache, by tier",
           s.device.hit_tokens, "tier=\"device\"");
  p.metric("kvtrie_cache_hit_tokens_total", "counter", "", s.host.hit_tokens, "tier=\"host\"");
  p.metric("kvtrie_cache_miss_tokens_total", "counter", "Prompt tokens computed for lack of a cached prefix",
           s.miss_tokens);
  p.metric("kvtrie_cache_pages", "gauge", "KV pages in use, by tier", s.device.pages_used, "tier=\"device\"");
  p.metric("kvtrie_cache_pages", "gauge", "", s.host.pages_used, "tier=\"host\"");
  p.metric("kvtrie_cache_pages_capacity", "gauge", "KV pages available, by tier", s.device.pages_total,
           "tier=\"device\"");
  p.metric("kvtrie_cache_pages_capacity", "gauge", "", s.host.pages_total, "tier=\"host\"");
  p.metric("kvtrie_cache_bytes", "gauge", "KV bytes in use, by tier", s.device.bytes_used, "tier=\"device\"");
  p.metric("kvtrie_cache_bytes", "gauge", "", s.host.bytes_used, "tier=\"host\"");
  p.metric("kvtrie_cache_bytes_budget", "gauge", "KV byte budget, by tier", s.device.bytes_budget,
           "tier=\"device\"");
  p.metric("kvtrie_cache_bytes_budget", "gauge", "", s.host.bytes_budget, "tier=\"host\"");
  p.metric("kvtrie_cache_demotions_total", "counter", "Pages moved from device to host memory", s.demotions);
  p.metric("kvtrie_cache_promotions_total", "counter", "Pages moved from host to device memory",
           s.promotions);
  p.metric("kvtrie_cache_evictions_total", "counter", "Pages dropped", s.evictions);
  p.metric("kvtrie_cache_copy_bytes_total", "counter", "Bytes copied between tiers", s.copy_bytes_to_host,
           "direction=\"to_host\"");
  p.metric("kvtrie_cache_copy_bytes_total", "counter", "", s.copy_bytes_to_device, "direction=\"to_device\"");
  p.metric(
      "kvtrie_cache_copy_seconds_total", "counter",
      "Seconds from submitting tier copies to seeing them complete, summed (an upper bound of copy time)",
      s.copy_seconds);
  if (s.disk.bytes_budget > 0) {
    const engine::DiskTierStats& d = s.disk;
    p.metric("kvtrie_cache_hit_tokens_total", "counter", "", d.hit_tokens, "tier=\"disk\"");
    p.metric("kvtrie_cache_pages", "gauge", "", d.pages, "tier=\"disk\"");
    p.metric("kvtrie_cache_bytes", "gauge", "", d.bytes_used, "tier=\"disk\"");
    p.metric("kvtrie_cache_bytes_budget", "gauge", "", d.bytes_budget, "tier=\"disk\"");
    p.metric("kvtrie_cache_disk_enabled", "gauge",
             "1 while the disk tier is on (a write failure turns it off)", d.enabled ? 1 : 0);
    p.metric("kvtrie_cache_disk_reads_total", "counter", "Pages read from the disk tier", d.reads);
    p.metric("kvtrie_cache_disk_read_bytes_total", "counter", "Bytes read from the disk tier", d.read_bytes);
    p.metric("kvtrie_cache_disk_writes_total", "counter", "Pages written to the disk tier", d.writes);
    p.metric("kvtrie_cache_disk_write_bytes_total", "counter", "Bytes written to the disk tier",
             d.write_bytes);
    p.metric("kvtrie_cache_disk_evictions_total", "counter", "Disk tier files removed for its budget",
             d.evictions);
    p.metric("kvtrie_cache_disk_refused_total", "counter", "Truncated, corrupt or foreign page files removed",
             d.refused);
    p.metric("kvtrie_cache_disk_dropped_writes_total", "counter",
             "Pages the disk tier did not write (queue full, tier off)", d.dropped_writes);
  }
  p.metric("kvtrie_cache_trie_nodes", "gauge", "Nodes of the prefix trie", s.trie_nodes);
  p.metric("kvtrie_cache_trie_tokens", "gauge", "Tokens held by the prefix trie", s.trie_tokens);
  if (const KvEventPublisher* events = model->kv_events.get()) {
    p.metric("kvtrie_kv_events_published_total", "counter", "KV events sent to routers (--kv-events)",
             events->published_events());
    p.metric("kvtrie_kv_events_batches_total", "counter", "KV event batches sent (the next sequence number)",
             events->published_batches());
    p.metric("kvtrie_kv_events_dropped_total", "counter",
             "KV events dropped because the publisher's queue was full (routers then miss pages)",
             events->dropped_events());
  }
  return HttpResponse::text(p.str(), "text/plain; version=0.0.4");
}

HttpResponse cache(ModelHost& host) {
  LoadedModel& model = host.require();
  const engine::CacheStats s = model.engine->cache_stats();
  return HttpResponse::json({{"enabled", s.enabled},
                             {"engine", model.engine->info().name},
                             {"page_tokens", s.page_tokens},
                             {"trie", {{"nodes", s.trie_nodes}, {"tokens", s.trie_tokens}}},
                             {"tiers", {{"device", tier_json(s.device)}, {"host", tier_json(s.host)}}},
                             {"miss_tokens", s.miss_tokens},
                             {"demotions", s.demotions},
                             {"promotions", s.promotions},
                             {"evictions", s.evictions},
                             {"disk",
                              {{"enabled", s.disk.enabled},
                               {"pages", s.disk.pages},
                               {"bytes_used", s.disk.bytes_used},
                               {"bytes_budget", s.disk.bytes_budget},
                               {"hit_tokens", s.disk.hit_tokens},
                               {"reads", s.disk.reads},
                               {"read_bytes", s.disk.read_bytes},
                               {"writes", s.disk.writes},
                               {"write_bytes", s.disk.write_bytes},
                               {"evictions", s.disk.evictions},
                               {"refused", s.disk.refused},
                               {"dropped_writes", s.disk.dropped_writes}}}});
}

// Every cached page's hash by tier, as the KV events publish them (docs/scale-out.md).
HttpResponse cache_pages(ModelHost& host) {
  LoadedModel& model = host.require();
  const engine::CachePageHashes pages = model.engine->cache_page_hashes();
  return HttpResponse::json({{"page_tokens", model.engine->cache_stats().page_tokens},
                             {"device", pages.device},
                             {"host", pages.host}});
}

HttpResponse flush(ModelHost& host) {
  LoadedModel& model = host.require();
  const engine::FlushResult r = model.engine->flush_cache();
  return HttpResponse::json(
      {{"flushed", true}, {"pages_freed", r.pages_freed}, {"pages_pinned", r.pages_pinned}});
}

}  // namespace

void register_admin_api(HttpServer& server, ModelHost& host, const Authenticator& auth) {
  server.route(
      "GET", "/metrics", [&host, &auth](const HttpRequest& r) { return metrics(host, auth, r.caller); },
      Access::Metrics);
  server.route("GET", "/cache", [&host](const HttpRequest&) { return cache(host); });
  server.route(
      "GET", "/cache/pages", [&host](const HttpRequest&) { return cache_pages(host); }, Access::Admin);
  server.route(
      "POST", "/cache/flush", [&host](const HttpRequest&) { return flush(host); }, Access::Admin);
}

}  // namespace kvtrie::server
