// The Ollama-facing protocols against the real binary: llama-server mode (started through a `llama-server`
// symlink with exactly Ollama's flags), the legacy `kvtrie runner` protocol, and device discovery. The same
// greedy request gives the same text through /generate, /completion and the legacy /completion.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <variant>

#include "server/llama_server_args.h"
#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

// Exactly the argument list SPEC 5 says Ollama passes (with every optional group present).
std::vector<std::string> ollama_flags(const std::string& model, int port) {
  return {"--model",
          model,
          "--port",
          std::to_string(port),
          "--host",
          "127.0.0.1",
          "--no-webui",
          "--offline",
          "-c",
          "256",
          "-np",
          "2",
          "--log-verbosity",
          "4",
          "--no-log-prefix",
          "--no-log-timestamps",
          "--no-jinja",
          "--chat-template",
          "chatml",
          "-ngl",
          "99",
          "-t",
          "4",
          "-b",
          "512",
          "-ub",
          "512",
          "--flash-attn",
          "auto",
          "--cache-type-k",
          "f16",
          "--cache-type-v",
          "f16",
          "--context-shift",
          "--keep",
          "4"};
}

std::string native_text(const std::string& model, const std::string& prompt, int n) {
  const int port = free_port();
  DaemonProcess d(
      {"serve", "--model", model, "--port", std::to_string(port), "--cpu-reference", "--ctx-size", "256"});
  EXPECT_TRUE(d.wait_ready(port)) << d.log();
  httplib::Client c("127.0.0.1", port);
  auto r = c.Post("/generate",
                  json({{"prompt", prompt},
                        {"max_tokens", n},
                        {"temperature", 0},
                        {"stream", false},
                        {"ignore_eos", true}})
                      .dump(),
                  "application/json");
  EXPECT_TRUE(r && r->status == 200);
  return r ? json::parse(r->body)["text"].get<std::string>() : "";
}

TEST(LlamaServerMode, OllamaFlagsServeCompletionWithTheSameGreedyText) {
  const auto model = tiny_model(scratch_dir()).string();
  const std::string expected = native_text(model, "Once upon", 10);
  const int port = free_port();
  DaemonProcess d(ollama_flags(model, port), llama_server_link());
  ASSERT_TRUE(d.wait_ready(port)) << d.log();
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(20, 0);
  json req = {{"prompt", "Once upon"},
              {"n_predict", 10},
              {"temperature", 0},
              {"stream", true},
              {"cache_prompt", true},
              {"ignore_eos", true},
              {"n_keep", 4},
              {"seed", 1},
              {"top_k", 40},
              {"top_p", 0.9},
              {"min_p", 0.0},
              {"repeat_penalty", 1.0},
              {"repeat_last_n", 64},
              {"frequency_penalty", 0.0},
              {"presence_penalty", 0.0},
              {"typical_p", 1.0},
              {"stop", json::array()},
              {"n_probs", 0}};
  auto r = c.Post("/completion", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string text;
  json last;
  for (const auto& line : lines_of(r->body)) {
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    json j = json::parse(line.substr(6));
    text += j["content"].get<std::string>();
    last = j;
  }
  EXPECT_EQ(text, expected);
  ASSERT_EQ(last["stop"], true);
  EXPECT_EQ(last["stop_type"], "limit");
  for (const char* key : {"cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms"})
    EXPECT_TRUE(last["timings"].contains(key)) << key;
  EXPECT_EQ(last["timings"]["predicted_n"], 10);

  // The flags that do not apply are logged as ignored, and the memory-accounting lines are present.
  const std::string log = d.log();
  EXPECT_NE(log.find("ignoring -ngl 99"), std::string::npos) << log;
  EXPECT_NE(log.find("batch=512 "), std::string::npos) << "-b is the engine's batch: " << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(offloaded \d+/3 layers to GPU)"))) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(\w+: \S+ model buffer size = \d+ MiB)"))) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(\w+: \S+ KV buffer size = \d+ MiB)"))) << log;
}

TEST(LlamaServerMode, HealthTokenizeTemplateAndChatCompletions) {
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d(ollama_flags(model, port), llama_server_link());
  ASSERT_TRUE(d.wait_ready(port)) << d.log();
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(20, 0);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");

  auto t = c.Post("/tokenize", R"({"content": "hello"})", "application/json");
  ASSERT_TRUE(t);
  auto dt =
      c.Post("/detokenize", json({{"tokens", json::parse(t->body)["tokens"]}}).dump(), "application/json");
  ASSERT_TRUE(dt);
  EXPECT_EQ(dt->status, 200);

  json msgs = {
      {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}}};
  auto at = c.Post("/apply-template", msgs.dump(), "application/json");
  ASSERT_TRUE(at);
  EXPECT_EQ(
      json::parse(at->body)["prompt"],
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  json chat = msgs;
  chat["max_tokens"] = 5;
  chat["temperature"] = 0;
  auto nc = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(nc);
  ASSERT_EQ(nc->status, 200) << nc->body;
  json ncj = json::parse(nc->body);
  EXPECT_EQ(ncj["object"], "chat.completion");
  const std::string full = ncj["choices"][0]["message"]["content"];

  chat["stream"] = true;
  auto sc = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(sc);
  auto lines = lines_of(sc->body);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "data: [DONE]");
  std::string streamed;
  std::string finish;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    json j = json::parse(lines[i].substr(6));
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    const json& choice = j["choices"][0];
    if (choice["delta"].contains("content")) streamed += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(streamed, full);
  EXPECT_FALSE(finish.empty());
}

// kvtrie's KV-event flags (docs/scale-out.md) work under the llama-server name too, as in `kvtrie serve`.
TEST(LlamaServerMode, KvEventFlagsReachTheOptions) {
  const auto parsed = kvtrie::server::parse_llama_server_args({"--model", "m.gguf", "--kv-events",
                                                               "tcp://*:5557", "--kv-events-replay",
                                                               "tcp://*:5558", "--kv-events-topic", "kv@r1"});
  ASSERT_TRUE(std::holds_alternative<kvtrie::server::LlamaServerArgs>(parsed))
      << std::get<std::string>(parsed);
  const kvtrie::server::ServeOptions& o = std::get<kvtrie::server::LlamaServerArgs>(parsed).options;
  EXPECT_EQ(o.kv_events, "tcp://*:5557");
  EXPECT_EQ(o.kv_events_replay, "tcp://*:5558");
  EXPECT_EQ(o.kv_events_topic, "kv@r1");
}

TEST(LlamaServerMode, UnknownFlagIsRefusedClearly) {
  DaemonProcess d({"--model", "x.gguf", "--frobnicate"}, llama_server_link());
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 2);
  EXPECT_NE(d.log().find("unknown argument: --frobnicate"), std::string::npos) << d.log();
}

// A mistyped key flag is refused by its name, without echoing the value (it may be a key), in both
// command lines.
TEST(LlamaServerMode, AMistypedKeyFlagIsRefusedWithoutEchoingItsValue) {
  DaemonProcess compat({"--model", "x.gguf", "--api-keys=sk-typo-secret-1"}, llama_server_link());
  EXPECT_EQ(compat.wait_exit(std::chrono::seconds(5)), 2);
  EXPECT_NE(compat.log().find("unknown argument: --api-keys"), std::string::npos) << compat.log();
  EXPECT_EQ(compat.log().find("sk-typo-secret-1"), std::string::npos) << compat.log();
  const auto model = tiny_model(scratch_dir()).string();  // an existing file: --model is checked first
  DaemonProcess native({"serve", "--model", model, "--api-keys=sk-typo-secret-2", "sk-typo-secret-3"},
                       kvtrie_binary());
  EXPECT_EQ(native.wait_exit(std::chrono::seconds(5)), 2);
  EXPECT_NE(native.log().find("--api-keys"), std::string::npos) << native.log();
  EXPECT_EQ(native.log().find("sk-typo-secret"), std::string::npos) << native.log();
}

TEST(LlamaServerMode, DeviceDiscoveryPrintsSystemInfoAndDeviceLines) {
  const int port = free_port();
  DaemonProcess d({"--port", std::to_string(port), "--verbose"}, llama_server_link());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (d.log().find("system_info:") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(d.log().find("system_info:"), std::string::npos) << d.log();
  while (d.log().find("answering /health only") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // At once: a SIGTERM right after start-up used to find the listener not yet running and hang the daemon.
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0) << d.how_it_ended() << "\n" << d.log();

  DaemonProcess list({"--list-devices", "--offline", "--verbose"}, llama_server_link());
  EXPECT_EQ(list.wait_exit(std::chrono::seconds(10)), 0);
  // Every device line has the exact shape Ollama's regex reads.
  const std::regex line(R"(^\s+(.+?):\s+(.+?)\s+\((\d+)\s+MiB,\s+(\d+)\s+MiB\s+free\)$)");
  for (const auto& l : lines_of(list.log())) {
    if (l.rfind("  Vulkan", 0) == 0) {
      EXPECT_TRUE(std::regex_match(l, line)) << l;
    }
  }
}

TEST(OllamaRunnerMode, HealthLoadAndCompletionWithNanosecondDurations) {
  const auto model = tiny_model(scratch_dir()).string();
  const std::string expected = native_text(model, "Once upon", 8);
  const int port = free_port();
  DaemonProcess d({"runner", "--model", model, "--port", std::to_string(port), "--ollama-engine",
                   "--cpu-reference", "--ctx-size", "256"});
  ASSERT_TRUE(d.wait_ready(port)) << d.log();
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(20, 0);
  json health;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    health = json::parse(h->body);
  } while (health["status"] != 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(health["status"], 0);
  EXPECT_TRUE(health["progress"].is_number());

  for (int op = 0; op <= 2; ++op) {
    auto l = c.Post(
        "/load",
        json({{"Operation", op}, {"Parallel", 1}, {"BatchSize", 512}, {"KvSize", 256}, {"NumThreads", 2}})
            .dump(),
        "application/json");
    ASSERT_TRUE(l);
    EXPECT_EQ(json::parse(l->body)["Success"], true) << l->body;
  }
  auto bad = c.Post("/load", R"({"Operation": 9})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);

  json req = {{"Prompt", "Once upon"}, {"Options", {{"num_predict", 8}, {"temperature", 0}, {"seed", 1}}}};
  auto r = c.Post("/completion", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string text;
  json last;
  for (const auto& line : lines_of(r->body)) {
    json j = json::parse(line);
    text += j["content"].get<std::string>();
    last = j;
  }
  ASSERT_EQ(last["done"], true);
  if (last["done_reason"] == 1) {
    // The run reached num_predict without an end-of-generation token: the text equals the native one.
    EXPECT_EQ(text, expected);
    EXPECT_EQ(last["eval_count"], 8);
  } else {
    EXPECT_EQ(expected.rfind(text, 0), 0u) << "stopped early, but not on a prefix of the native text";
  }
  EXPECT_TRUE(last["prompt_eval_duration"].is_number_integer());
  EXPECT_TRUE(last["eval_duration"].is_number_integer());
  EXPECT_GT(last["prompt_eval_count"].get<int>(), 0);
}

}  // namespace
}  // namespace kvtrie::test
