// The OpenAI-compatible API of `kvtrie serve` against the real daemon: the wire format of chat completions
// and completions (streamed and not), usage, sampling options, errors; on the Vulkan engine (lavapipe), the
// cached tokens of a conversation's second turn and a chat template recognised from the model file.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

// The events of an SSE body: each "data: " payload, "[DONE]" included.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  for (const auto& line : lines_of(body)) {
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    out.push_back(line.substr(6));
  }
  return out;
}

class OpenAiApi : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}, const std::filesystem::path& model = {}) {
    port_ = free_port();
    const auto path = model.empty() ? tiny_model(scratch_dir()) : model;
    std::vector<std::string> args = {"serve",      "--model", path.string(), "--port", std::to_string(port_),
                                     "--ctx-size", "256"};
    args.insert(args.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<DaemonProcess>(args);
    ASSERT_TRUE(daemon_->wait_ready(port_, std::chrono::seconds(60))) << daemon_->log();
  }
  httplib::Result post_raw(const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  json post(const std::string& path, const json& body, int expect = 200) {
    auto r = post_raw(path, body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, expect) << r->body;
    return json::parse(r->body, nullptr, false);
  }
  std::string chatml_prompt(const json& messages) {
    std::string s;
    for (const auto& m : messages)
      s += "<|im_start|>" + m["role"].get<std::string>() + "\n" + m["content"].get<std::string>() +
           "<|im_end|>\n";
    return s + "<|im_start|>assistant\n";
  }
  size_t token_count(const std::string& text) {
    return post("/tokenize", {{"content", text}, {"add_special", true}})["tokens"].size();
  }
  int port_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
};

const json kMessages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                    {{"role", "user"}, {"content", "Tell me a story."}}});

TEST_F(OpenAiApi, ModelsListsTheServedModel) {
  start({"--cpu-reference"});
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["id"], "kvtrie-synth tiny");
  EXPECT_TRUE(j["data"][0]["created"].is_number_integer());
}

TEST_F(OpenAiApi, ChatCompletionRendersTheTemplateAndReportsUsage) {
  start({"--cpu-reference"});
  const json r =
      post("/v1/chat/completions",
           {{"model", "anything"}, {"messages", kMessages}, {"max_tokens", 6}, {"temperature", 0}});
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(r["model"], "kvtrie-synth tiny");
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_TRUE(choice["message"]["content"].is_string());
  const json& usage = r["usage"];
  // The model has no chat template: ChatML, the documented fallback, tokenized with BOS.
  EXPECT_EQ(usage["prompt_tokens"].get<size_t>(), token_count(chatml_prompt(kMessages)));
  EXPECT_LE(usage["completion_tokens"].get<int>(), 6);
  EXPECT_EQ(usage["total_tokens"], usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0);  // the CPU reference engine has no cache
  if (usage["completion_tokens"] == 6) {
    EXPECT_EQ(choice["finish_reason"], "length");
  }
  EXPECT_NE(daemon_->log().find("chat template: chatml (the model has no tokenizer.chat_template)"),
            std::string::npos);
}

TEST_F(OpenAiApi, StreamedChatEqualsTheWholeAnswerAndEndsWithDone) {
  start({"--cpu-reference"});
  json req = {{"messages", kMessages}, {"max_completion_tokens", 8}, {"temperature", 0}};
  const json whole = post("/v1/chat/completions", req);
  req["stream"] = true;
  for (bool include_usage : {false, true}) {
    if (include_usage) req["stream_options"] = {{"include_usage", true}};
    auto r = post_raw("/v1/chat/completions", req);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    const auto events = sse_events(r->body);
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text, finish;
    json usage;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      const json e = json::parse(events[i]);
      EXPECT_EQ(e["object"], "chat.completion.chunk");
      EXPECT_EQ(e.contains("usage"), include_usage) << events[i];
      if (e["choices"].empty()) {  // the usage event
        usage = e["usage"];
        continue;
      }
      const json& choice = e["choices"][0];
      if (i == 0) {
        EXPECT_EQ(choice["delta"]["role"], "assistant");
      }
      if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    EXPECT_EQ(text, whole["choices"][0]["message"]["content"]);
    EXPECT_EQ(finish, whole["choices"][0]["finish_reason"]);
    if (include_usage) {
      ASSERT_TRUE(usage.is_object()) << "no usage event";
      EXPECT_EQ(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
      EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]);
      EXPECT_TRUE(usage["prompt_tokens_details"].contains("cached_tokens"));
    }
  }
}

TEST_F(OpenAiApi, SeedMakesSampledChatsRepeatAndStopEndsTheText) {
  start({"--cpu-reference"});
  json req = {
      {"messages", kMessages}, {"max_tokens", 24}, {"temperature", 1.0}, {"top_p", 0.9}, {"seed", 11}};
  const json a = post("/v1/chat/completions", req);
  const json b = post("/v1/chat/completions", req);
  EXPECT_EQ(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]);

  const std::string text = a["choices"][0]["message"]["content"];
  size_t at = std::string::npos;
  for (size_t i = 2; i + 1 < text.size() && at == std::string::npos; ++i)
    if (std::isalpha(static_cast<unsigned char>(text[i])) &&
        std::isalpha(static_cast<unsigned char>(text[i + 1])))
      at = text.find(text.substr(i, 2));
  if (at == std::string::npos)
    GTEST_SKIP() << "the random model wrote no two letters to stop on: " << json(text);
  req["stop"] = text.substr(at, 2);
  const json stopped = post("/v1/chat/completions", req);
  EXPECT_EQ(stopped["choices"][0]["message"]["content"], text.substr(0, at));
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
}

TEST_F(OpenAiApi, CompletionsMatchTheNativeGreedyTextStreamedOrNot) {
  start({"--cpu-reference"});
  const json native =
      post("/generate",
           {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}, {"stream", false}});
  json req = {{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}};
  const json whole = post("/v1/completions", req);
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["choices"][0]["text"], native["text"]);
  EXPECT_EQ(whole["usage"]["prompt_tokens"], native["prompt_tokens"]);
  EXPECT_EQ(whole["usage"]["completion_tokens"], native["completion_tokens"]);

  req["stream"] = true;
  auto r = post_raw("/v1/completions", req);
  ASSERT_TRUE(r);
  const auto events = sse_events(r->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, native["text"]);

  // Token ids as the prompt, echo and logprobs.
  const json ids = post("/tokenize", {{"content", "Once upon a time"}, {"add_special", true}})["tokens"];
  const json echoed =
      post("/v1/completions",
           {{"prompt", ids}, {"max_tokens", 10}, {"temperature", 0}, {"echo", true}, {"logprobs", 2}});
  const std::string echoed_text = echoed["choices"][0]["text"];
  EXPECT_EQ(echoed_text.substr(echoed_text.size() - native["text"].get<std::string>().size()),
            native["text"]);
  const json& lp = echoed["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), native["tokens"].size());
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
}

TEST_F(OpenAiApi, AContextOverflowIsAnOpenAiShapedError) {
  start({"--cpu-reference"});
  const json r = post("/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", std::string(600, 'x')}}}}}, 400);
  ASSERT_TRUE(r["error"].is_object());
  EXPECT_NE(r["error"]["message"].get<std::string>().find("the context holds 256"), std::string::npos);
  EXPECT_EQ(r["error"]["type"], "invalid_request_error");
}

TEST_F(OpenAiApi, ChatTemplateOptionOverridesTheModelAndAnUnknownNameIsRefused) {
  const auto conf = scratch_dir() / "chat-template.conf";
  std::ofstream(conf) << "chat-template = gemma\n";
  start({"--cpu-reference", "--config", conf.string(), "--chat-template", "llama3"});
  EXPECT_NE(daemon_->log().find("chat template: llama3 (--chat-template)"), std::string::npos)
      << daemon_->log();
  const json r = post("/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 1}});
  EXPECT_EQ(r["usage"]["prompt_tokens"].get<size_t>(),
            token_count("<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nTell me a story.<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n"));
  daemon_.reset();
  // From the config file alone.
  start({"--cpu-reference", "--config", conf.string()});
  EXPECT_NE(daemon_->log().find("chat template: gemma (--chat-template)"), std::string::npos)
      << daemon_->log();

  DaemonProcess bad({"serve", "--model", tiny_model(scratch_dir()).string(), "--chat-template", "jinja"});
  const auto code = bad.wait_exit(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value()) << bad.how_it_ended();
  EXPECT_NE(*code, 0);
  EXPECT_NE(
      bad.log().find("unknown chat template \"jinja\" (built in: chatml, qwen3, llama3, llama2, mistral, "
                     "gemma)"),
      std::string::npos)
      << bad.log();
}

// On the Vulkan engine, whose prefix cache serves the earlier turns.
class OpenAiApiVulkan : public OpenAiApi {
 protected:
  void TearDown() override {
    if (!daemon_) return;
    daemon_->signal(SIGTERM);
    EXPECT_EQ(daemon_->wait_exit(std::chrono::seconds(20)), 0) << daemon_->log();
    EXPECT_EQ(daemon_->log().find("vulkan validation"), std::string::npos) << daemon_->log();
  }
};

TEST_F(OpenAiApiVulkan, TheSecondTurnOfAConversationReusesTheFirstTurnsPrompt) {
  start({"--deterministic"});
  json messages = kMessages;
  const json first =
      post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
  messages.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And then?"}});
  json req = {{"messages", messages},
              {"max_tokens", 8},
              {"temperature", 0},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}};
  auto r = post_raw("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  const auto events = sse_events(r->body);
  ASSERT_GE(events.size(), 2u);
  const json usage = json::parse(events[events.size() - 2])["usage"];
  EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int>(),
            first["usage"]["prompt_tokens"].get<int>())
      << "the second turn recomputed part of the first turn's prompt";
  EXPECT_LT(usage["prompt_tokens_details"]["cached_tokens"].get<int>(), usage["prompt_tokens"].get<int>());
}

TEST_F(OpenAiApiVulkan, AChatTemplateInTheModelFileIsRecognised) {
  synth::SynthOptions o;
  o.shape = *synth::preset("tiny", TensorType::F32);
  o.chat_template =
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}";
  const auto model = scratch_dir() / "tiny-llama3-template.gguf";
  synth::write_model(model, o);
  start({}, model);
  EXPECT_NE(daemon_->log().find("chat template: llama3 (recognised in the model's tokenizer.chat_template)"),
            std::string::npos)
      << daemon_->log();
  const json r = post("/v1/chat/completions", {{"messages", kMessages}, {"max_tokens", 2}});
  const std::string llama3 =
      "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nTell me a story.<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(r["usage"]["prompt_tokens"].get<size_t>(), token_count(llama3));
}

}  // namespace
}  // namespace kvtrie::test
