// Request bodies as `curl -d` sends them (Content-Type: application/x-www-form-urlencoded) against the real
// daemon in every API mode: native, llama-server, the legacy runner and OpenAI. Regression: the packaged
// cpp-httplib refused such bodies over 8,192 bytes with "413 request body exceeds 8388608 bytes" before any
// handler ran, so a prompt of a few thousand tokens could not be sent the way the README shows. Now bodies up
// to --max-body-mb reach the handler whole (a prompt too long for the tiny model's 256-token context gets
// the 400 that says so, with its full token count), and one byte more gets a 413 naming the real limit.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/server/daemon_process.h"
#include "tests/server/raw_http.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

constexpr size_t kLimitMb = 2;
constexpr size_t kLimit = kLimitMb << 20;
const char* kForm = "application/x-www-form-urlencoded";  // what curl -d sends

struct Mode {
  const char* name;
  const char* path;
  // The body of a request for `prompt` (with a short generation).
  std::function<json(const std::string& prompt)> body;
};

// gtest prints a parameter into ctest's test label: the name, not the raw bytes (see test_bad_input.cpp).
void PrintTo(const Mode& m, std::ostream* os) {
  *os << m.name;
}

const std::vector<Mode>& modes() {
  static const std::vector<Mode> all = {
      {"native", "/generate",
       [](const std::string& p) {
         return json{{"prompt", p}, {"max_tokens", 4}, {"stream", false}};
       }},
      {"llama-server", "/completion",
       [](const std::string& p) {
         return json{{"prompt", p}, {"n_predict", 4}, {"stream", false}};
       }},
      {"runner", "/completion",
       [](const std::string& p) {
         return json{{"Prompt", p}, {"Options", {{"num_predict", 4}}}};
       }},
      {"openai-chat", "/v1/chat/completions",
       [](const std::string& p) {
         return json{
             {"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", p}}}}, {"max_tokens", 4}};
       }},
      {"openai-completions", "/v1/completions",
       [](const std::string& p) {
         return json{{"model", "tiny"}, {"prompt", p}, {"max_tokens", 4}};
       }},
  };
  return all;
}

// A prompt that makes the mode's body exactly `size` bytes.
std::string body_of_size(const Mode& mode, size_t size) {
  const size_t overhead = mode.body("").dump().size();
  std::string prompt;
  const std::string sentence = "Once upon a time there was a tiny model. ";
  while (prompt.size() + overhead < size) prompt += sentence;
  prompt.resize(size - overhead);
  const std::string body = mode.body(prompt).dump();
  EXPECT_EQ(body.size(), size);
  return body;
}

std::unique_ptr<DaemonProcess> start_daemon(const std::string& mode, int port) {
  const auto model = tiny_model(scratch_dir()).string();
  const std::string p = std::to_string(port), mb = std::to_string(kLimitMb);
  if (mode == "llama-server") {
    return std::make_unique<DaemonProcess>(
        std::vector<std::string>{"--model", model, "--port", p, "-c", "256", "-np", "1", "--max-body-mb", mb},
        llama_server_link());
  }
  const char* sub = mode == "runner" ? "runner" : "serve";
  return std::make_unique<DaemonProcess>(std::vector<std::string>{
      sub, "--model", model, "--port", p, "--cpu-reference", "--ctx-size", "256", "--max-body-mb", mb});
}

class BodyLimits : public ::testing::TestWithParam<Mode> {};

TEST_P(BodyLimits, FormBodiesUpToTheLimitReachTheHandlerAndOneByteMoreGetsATruthful413) {
  const Mode& mode = GetParam();
  const int port = free_port();
  auto daemon = start_daemon(mode.name, port);
  ASSERT_TRUE(std::string_view(mode.name) == "runner"
                  ? daemon->wait_runner_ready(port, std::chrono::seconds(60))
                  : daemon->wait_ready(port, std::chrono::seconds(60)))
      << daemon->log();

  // Served: a body over httplib's 8,192-byte form limit whose prompt fits the context (the rest is JSON white
  // space, as in a generously indented request file), with and without a Content-Type.
  std::string padded = mode.body("Once upon a time").dump();
  padded.insert(1, 10 * 1024, ' ');
  for (std::optional<std::string> type : {std::optional<std::string>(kForm), std::optional<std::string>()}) {
    const RawReply r = raw_post(port, mode.path, padded, type);
    EXPECT_EQ(r.status, 200) << mode.name << " " << type.value_or("(none)") << ": " << r.body;
  }

  // Whole bodies of 10 KB, 1 MB and just under the limit: the prompt is too long for the context, and the
  // 400 counts all of its tokens (the built-in vocabulary spends about one token per byte).
  for (size_t size : {size_t{10 * 1024}, size_t{1000 * 1000}, kLimit - 64}) {
    const RawReply r = raw_post(port, mode.path, body_of_size(mode, size), std::string(kForm));
    ASSERT_EQ(r.status, 400) << mode.name << " " << size << ": " << r.body.substr(0, 300);
    const std::string message = json::parse(r.body)["error"]["message"];
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(message, m, std::regex(R"(the prompt has (\d+) tokens but the context holds 256)")))
        << message;
    EXPECT_GE(std::stoul(m[1]), size * 9 / 10) << mode.name << ": not the whole body was read: " << message;
  }

  const RawReply over = raw_post(port, mode.path, body_of_size(mode, kLimit + 1), std::string(kForm));
  ASSERT_EQ(over.status, 413) << over.body;
  const json err = json::parse(over.body)["error"];
  EXPECT_EQ(err["message"],
            "the request body (2097153 bytes) is over the limit of 2 MiB (2097152 bytes); raise it "
            "with --max-body-mb");
  EXPECT_EQ(err["type"], "payload_too_large_error");

  // Still serving.
  EXPECT_EQ(raw_post(port, mode.path, mode.body("Once").dump(), std::string(kForm)).status, 200);
}

INSTANTIATE_TEST_SUITE_P(EveryApiMode, BodyLimits, ::testing::ValuesIn(modes()),
                         [](const ::testing::TestParamInfo<Mode>& p) {
                           std::string name = p.param.name;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace kvtrie::test
