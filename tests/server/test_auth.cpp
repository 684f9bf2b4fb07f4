// API keys on the real daemon, in each API mode: without a key, with a wrong one and with the right one on
// every endpoint class (401 / 403 / 200), keys from the key file, the config file, the environment and
// llama.cpp's --api-key flag, /metrics open only with --metrics-public, no key in the log or an error body,
// and a key file re-read on SIGHUP while a stream stays open.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

struct Reply {
  int status = 0;  // 0: no answer
  std::string body;
  std::string www_authenticate;
};

// One request with `key` in the given header ("" sends none): "Authorization" sends "Bearer KEY".
Reply call(int port, const std::string& method, const std::string& path, const std::string& key,
           const json& body = json::object(), const std::string& header = "Authorization") {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace(header, header == "Authorization" ? "Bearer " + key : key);
  auto r = method == "GET" ? c.Get(path.c_str(), headers)
                           : c.Post(path.c_str(), headers, body.dump(), "application/json");
  if (!r) return {};
  return {r->status, r->body, r->get_header_value("WWW-Authenticate")};
}

std::filesystem::path write_file(const std::string& name, const std::string& text) {
  const auto path = scratch_dir() / name;
  std::ofstream(path) << text;
  return path;
}

struct Endpoint {
  std::string method;
  std::string path;
  json body;
};

const json kGenerate = {{"prompt", "Hello"}, {"max_tokens", 2}, {"stream", false}};
const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};

// Every endpoint that needs some key: without one, or with a key the daemon does not know, each answers 401
// with the error JSON (naming neither key), and with `good` 200.
void expect_user_endpoints_need_a_key(int port, const std::vector<Endpoint>& endpoints,
                                      const std::string& good) {
  for (const auto& e : endpoints) {
    SCOPED_TRACE(e.method + " " + e.path);
    const Reply none = call(port, e.method, e.path, "", e.body);
    EXPECT_EQ(none.status, 401) << none.body;
    EXPECT_EQ(none.www_authenticate, "Bearer");
    const json err = json::parse(none.body, nullptr, false);
    EXPECT_EQ(err["error"]["code"], 401) << none.body;
    EXPECT_EQ(err["error"]["type"], "authentication_error") << none.body;
    const Reply wrong = call(port, e.method, e.path, "sk-wrong-9f3a", e.body);
    EXPECT_EQ(wrong.status, 401) << wrong.body;
    EXPECT_EQ(wrong.body.find("sk-wrong"), std::string::npos) << wrong.body;
    const Reply right = call(port, e.method, e.path, good, e.body);
    EXPECT_EQ(right.status, 200) << right.body;
  }
}

void stop_cleanly(DaemonProcess& d) {
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(20)), 0) << d.log();
}

TEST(NativeAuth, EveryEndpointClassNeedsTheRightKeyAndNoKeyIsLogged) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  const auto keys = write_file("native-keys.txt", "# tenants\nsk-alice-5b1e alice\nsk-ops-77c0 ops admin\n");
  // The key file comes from the config file, one more key from the environment.
  const auto conf = write_file("auth.conf", "api-key-file = " + keys.string() + "\n");
  DaemonProcess d({"serve", "--config", conf.string(), "--model", model, "--port", std::to_string(port),
                   "--cpu-reference", "--ctx-size", "256", "--log-level", "debug"},
                  kvtrie_binary(), {"KVTRIE_API_KEY=sk-env-40d2"});
  ASSERT_TRUE(d.wait_ready(port)) << d.log();  // /health needs no key

  expect_user_endpoints_need_a_key(port,
                                   {{"POST", "/generate", kGenerate},
                                    {"POST", "/tokenize", {{"content", "Hi"}}},
                                    {"POST", "/v1/chat/completions", kChat},
                                    {"POST", "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}}},
                                    {"GET", "/v1/models", {}},
                                    {"GET", "/cache", {}},
                                    {"GET", "/metrics", {}}},
                                   "sk-alice-5b1e");
  EXPECT_EQ(call(port, "POST", "/generate", "sk-alice-5b1e", kGenerate, "x-api-key").status, 200);
  EXPECT_EQ(call(port, "POST", "/generate", "sk-env-40d2", kGenerate).status, 200);

  // Flushing the cache needs an admin key: 401 without a key, 403 with a user key.
  EXPECT_EQ(call(port, "POST", "/cache/flush", "").status, 401);
  const Reply user_flush = call(port, "POST", "/cache/flush", "sk-alice-5b1e");
  EXPECT_EQ(user_flush.status, 403) << user_flush.body;
  EXPECT_EQ(json::parse(user_flush.body)["error"]["type"], "permission_error");
  EXPECT_EQ(call(port, "POST", "/cache/flush", "sk-env-40d2").status, 403);
  EXPECT_EQ(call(port, "POST", "/cache/flush", "sk-ops-77c0").status, 200);

  // Requests per tenant, by name: a user key sees its own tenant only, the admin key every tenant.
  const std::string as_alice = call(port, "GET", "/metrics", "sk-alice-5b1e").body;
  EXPECT_NE(as_alice.find("kvtrie_tenant_requests_total{tenant=\"alice\"}"), std::string::npos) << as_alice;
  EXPECT_EQ(as_alice.find("tenant=\"ops\""), std::string::npos) << as_alice;
  const std::string as_ops = call(port, "GET", "/metrics", "sk-ops-77c0").body;
  EXPECT_NE(as_ops.find("tenant=\"alice\""), std::string::npos) << as_ops;
  EXPECT_NE(as_ops.find("tenant=\"ops\""), std::string::npos) << as_ops;
  EXPECT_NE(as_ops.find("kvtrie_auth_refused_total"), std::string::npos) << as_ops;
  for (const std::string& metrics : {as_alice, as_ops})
    for (const char* key : {"sk-alice", "sk-ops", "sk-env", "sk-wrong"})
      EXPECT_EQ(metrics.find(key), std::string::npos) << key << " in /metrics";

  stop_cleanly(d);
  const std::string log = d.log();
  for (const char* key : {"sk-alice", "sk-ops", "sk-env", "sk-wrong"})
    EXPECT_EQ(log.find(key), std::string::npos) << key << " in the log:\n" << log;
  EXPECT_NE(log.find("API keys required"), std::string::npos) << log;
}

TEST(NativeAuth, SighupReloadAddsAndRemovesAKeyWithoutDroppingAnOpenStream) {
  const auto model = slow_model(scratch_dir()).string();
  const int port = free_port();
  const auto keys = write_file("reload-keys.txt", "sk-old-1 team\n");
  DaemonProcess d({"serve", "--model", model, "--port", std::to_string(port), "--cpu-reference",
                   "--api-key-file", keys.string()});
  ASSERT_TRUE(d.wait_ready(port)) << d.log();

  // A stream opened with the key that the reload removes.
  std::string streamed;
  int stream_status = 0;
  std::atomic<bool> first_bytes{false};
  std::thread client([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/generate";
    req.headers = {{"Authorization", "Bearer sk-old-1"}};
    req.set_header("Content-Type", "application/json");
    req.body = json({{"prompt", "go"}, {"max_tokens", 600}, {"ignore_eos", true}}).dump();
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      streamed.append(data, n);
      first_bytes = true;
      return true;
    };
    if (auto r = c.send(req)) stream_status = r->status;
  });
  for (int i = 0; i < 2000 && !first_bytes; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(first_bytes) << d.log();

  write_file("reload-keys.txt", "sk-new-2 team\n");
  d.signal(SIGHUP);
  bool new_works = false;
  for (int i = 0; i < 200 && !new_works; ++i) {
    new_works = call(port, "POST", "/tokenize", "sk-new-2", {{"content", "Hi"}}).status == 200;
    if (!new_works) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(new_works) << d.log();
  EXPECT_EQ(call(port, "POST", "/tokenize", "sk-old-1", {{"content", "Hi"}}).status, 401);
  // A broken file on the next SIGHUP keeps the keys in force.
  write_file("reload-keys.txt", "sk-bad-3 one two three\n");
  d.signal(SIGHUP);
  for (int i = 0; i < 200 && d.log().find("keys in force are kept") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(call(port, "POST", "/tokenize", "sk-new-2", {{"content", "Hi"}}).status, 200);

  client.join();
  EXPECT_EQ(stream_status, 200);
  const auto lines = lines_of(streamed);
  ASSERT_FALSE(lines.empty());
  const json last = json::parse(lines.back());
  EXPECT_EQ(last["done_reason"], "length") << "the open stream was cut by the reload";
  EXPECT_EQ(last["completion_tokens"], 600);
  stop_cleanly(d);
  EXPECT_NE(d.log().find("API key file re-read"), std::string::npos) << d.log();
  EXPECT_EQ(d.log().find("sk-bad"), std::string::npos) << d.log();
}

TEST(NativeAuth, MetricsArePublicOnlyWithMetricsPublic) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d({"serve", "--model", model, "--port", std::to_string(port), "--cpu-reference", "--api-key",
                   "sk-one-1", "--api-key", "sk-two-2", "--metrics-public"});
  ASSERT_TRUE(d.wait_ready(port)) << d.log();
  EXPECT_EQ(call(port, "GET", "/metrics", "").status, 200);
  EXPECT_EQ(call(port, "GET", "/cache", "").status, 401);
  EXPECT_EQ(call(port, "POST", "/generate", "", kGenerate).status, 401);
  EXPECT_EQ(call(port, "POST", "/generate", "sk-two-2", kGenerate).status, 200);
  stop_cleanly(d);
}

TEST(NativeAuth, WithoutKeysEverythingIsOpenAndListeningBeyondLoopbackWarns) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d(
      {"serve", "--model", model, "--port", std::to_string(port), "--cpu-reference", "--host", "0.0.0.0"});
  ASSERT_TRUE(d.wait_ready(port)) << d.log();
  EXPECT_EQ(call(port, "POST", "/generate", "", kGenerate).status, 200);
  EXPECT_EQ(call(port, "POST", "/cache/flush", "").status, 200);
  EXPECT_EQ(call(port, "GET", "/metrics", "").status, 200);
  stop_cleanly(d);
  EXPECT_NE(d.log().find("without API keys"), std::string::npos) << d.log();
}

TEST(LlamaServerAuth, LlamaCppApiKeyFlagGuardsEveryEndpointButHealth) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  // llama.cpp's spelling: several keys in one value, separated by commas.
  DaemonProcess d(
      {"--model", model, "--port", std::to_string(port), "-c", "256", "--api-key", "sk-l1-aa,sk-l2-bb"},
      llama_server_link());
  ASSERT_TRUE(d.wait_ready(port, std::chrono::seconds(60))) << d.log();
  expect_user_endpoints_need_a_key(port,
                                   {{"POST", "/completion", {{"prompt", "Hi"}, {"n_predict", 2}}},
                                    {"POST", "/v1/chat/completions", kChat},
                                    {"GET", "/props", {}},
                                    {"GET", "/metrics", {}}},
                                   "sk-l2-bb");
  EXPECT_EQ(call(port, "POST", "/completion", "sk-l1-aa", {{"prompt", "Hi"}, {"n_predict", 2}}).status, 200);
  EXPECT_EQ(call(port, "POST", "/cache/flush", "sk-l1-aa").status, 403);
  stop_cleanly(d);
  EXPECT_EQ(d.log().find("sk-l"), std::string::npos) << d.log();
}

TEST(OllamaRunnerAuth, RunnerModeNeedsTheKeyForCompletion) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d({"runner", "--model", model, "--port", std::to_string(port), "--cpu-reference",
                   "--ctx-size", "256", "--api-key", "sk-runner-3c"});
  ASSERT_TRUE(d.wait_runner_ready(port)) << d.log();
  expect_user_endpoints_need_a_key(
      port, {{"POST", "/completion", {{"Prompt", "Hi"}, {"Options", {{"num_predict", 2}}}}}}, "sk-runner-3c");
  stop_cleanly(d);
}

}  // namespace
}  // namespace kvtrie::test
