// Table-driven bad input against the real daemon: every case gets the right 4xx with the error JSON
// {"error": {"code", "message", "type"}}, and a good request right after it still succeeds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

struct BadCase {
  const char* name;
  const char* method;
  const char* path;
  std::string body;
  int status;
};

// gtest prints a parameter into ctest's test label; printing the raw bytes (pointers included) made the label
// differ between discovery and run, and ctest then reported the case as skipped.
void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.name;
}

std::string tokens_json(int count, int id) {
  std::string s = "{\"tokens\": [";
  for (int i = 0; i < count; ++i) {
    // Appended piece by piece: GCC 12 at -O3 reports a bogus -Wrestrict for const char* + std::string&&.
    if (i) s += ',';
    s += std::to_string(id);
  }
  return s + "]}";
}

std::vector<BadCase> cases() {
  return {
      {"MalformedJson", "POST", "/generate", R"({"prompt":)", 400},
      {"TruncatedJson", "POST", "/generate", R"({"prompt": "abc")", 400},
      {"NotJson", "POST", "/generate", "hello", 400},
      {"EmptyBody", "POST", "/generate", "", 400},
      {"TrailingGarbage", "POST", "/generate", R"({"prompt":"a"} x)", 400},
      {"ArrayBody", "POST", "/generate", "[1,2]", 400},
      {"StringBody", "POST", "/generate", R"("x")", 400},
      {"PromptNumber", "POST", "/generate", R"({"prompt": 5})", 400},
      {"PromptObject", "POST", "/generate", R"({"prompt": {"a": 1}})", 400},
      {"PromptNull", "POST", "/generate", R"({"prompt": null})", 400},
      {"NoPrompt", "POST", "/generate", "{}", 400},
      {"PromptAndTokens", "POST", "/generate", R"({"prompt": "a", "tokens": [1]})", 400},
      {"EmptyPrompt", "POST", "/generate", R"({"prompt": ""})", 400},
      {"EmptyTokens", "POST", "/generate", R"({"tokens": []})", 400},
      {"NegativeToken", "POST", "/generate", R"({"tokens": [1, -1]})", 400},
      {"TokenEqualToVocab", "POST", "/generate", R"({"tokens": [320]})", 400},
      {"HugeToken", "POST", "/generate", R"({"tokens": [1000000000000]})", 400},
      {"StringToken", "POST", "/generate", R"({"tokens": ["a"]})", 400},
      {"FloatToken", "POST", "/generate", R"({"tokens": [1.5]})", 400},
      {"TokensNotArray", "POST", "/generate", R"({"tokens": "1,2"})", 400},
      {"PromptLongerThanContext", "POST", "/generate", tokens_json(300, 5), 400},
      {"InvalidUtf8Prompt", "POST", "/generate", "{\"prompt\": \"a\xff\xfe b\"}", 400},
      {"MaxTokensString", "POST", "/generate", R"({"prompt": "a", "max_tokens": "10"})", 400},
      {"MaxTokensNegative", "POST", "/generate", R"({"prompt": "a", "max_tokens": -5})", 400},
      {"MaxTokensHuge", "POST", "/generate", R"({"prompt": "a", "max_tokens": 1000000000})", 400},
      {"MaxTokensFraction", "POST", "/generate", R"({"prompt": "a", "max_tokens": 1.5})", 400},
      {"TemperatureString", "POST", "/generate", R"({"prompt": "a", "temperature": "hot"})", 400},
      {"TemperatureNegative", "POST", "/generate", R"({"prompt": "a", "temperature": -1})", 400},
      {"TopPAboveOne", "POST", "/generate", R"({"prompt": "a", "top_p": 1.5})", 400},
      {"TopKNegative", "POST", "/generate", R"({"prompt": "a", "top_k": -3})", 400},
      {"MinPAboveOne", "POST", "/generate", R"({"prompt": "a", "min_p": 2})", 400},
      {"RepeatPenaltyNegative", "POST", "/generate", R"({"prompt": "a", "repeat_penalty": -1})", 400},
      {"RepeatLastNBelowMinusOne", "POST", "/generate", R"({"prompt": "a", "repeat_last_n": -2})", 400},
      {"PresencePenaltyString", "POST", "/generate", R"({"prompt": "a", "presence_penalty": "x"})", 400},
      {"SeedString", "POST", "/generate", R"({"prompt": "a", "seed": "1"})", 400},
      {"LogprobsTooMany", "POST", "/generate", R"({"prompt": "a", "logprobs": 21})", 400},
      {"LogprobsNegative", "POST", "/generate", R"({"prompt": "a", "logprobs": -1})", 400},
      {"LogprobsString", "POST", "/generate", R"({"prompt": "a", "logprobs": "3"})", 400},
      {"StreamString", "POST", "/generate", R"({"prompt": "a", "stream": "yes"})", 400},
      {"AddBosString", "POST", "/generate", R"({"prompt": "a", "add_bos": "true"})", 400},
      {"StopNumber", "POST", "/generate", R"({"prompt": "a", "stop": 5})", 400},
      {"StopNumbers", "POST", "/generate", R"({"prompt": "a", "stop": [1, 2]})", 400},
      {"StopEmptyString", "POST", "/generate", R"({"prompt": "a", "stop": [""]})", 400},
      {"TooManyStops", "POST", "/generate",
       R"({"prompt": "a", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})",
       400},
      {"TokenizeMissingContent", "POST", "/tokenize", "{}", 400},
      {"TokenizeContentNumber", "POST", "/tokenize", R"({"content": 3})", 400},
      {"TokenizeInvalidUtf8", "POST", "/tokenize", "{\"content\": \"\xc3\x28\"}", 400},
      {"DetokenizeMissingTokens", "POST", "/detokenize", "{}", 400},
      {"DetokenizeOutOfVocab", "POST", "/detokenize", R"({"tokens": [99999]})", 400},
      {"GetOnGenerate", "GET", "/generate", "", 405},
      {"DeleteOnTokenize", "DELETE", "/tokenize", "", 405},
      {"GetOnCacheFlush", "GET", "/cache/flush", "", 405},
      {"PostOnHealth", "POST", "/health", "{}", 405},
      {"UnknownEndpoint", "GET", "/nope", "", 404},
      {"OtherApiEndpoint", "POST", "/completion", R"({"prompt": "a"})", 404},
      {"ChatNoMessages", "POST", "/v1/chat/completions", "{}", 400},
      {"ChatEmptyMessages", "POST", "/v1/chat/completions", R"({"messages": []})", 400},
      {"ChatMessageNotObject", "POST", "/v1/chat/completions", R"({"messages": ["hi"]})", 400},
      {"ChatMessageNoRole", "POST", "/v1/chat/completions", R"({"messages": [{"content": "hi"}]})", 400},
      {"ChatContentNumber", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": 5}]})", 400},
      {"ChatImagePart", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       400},
      {"ChatPartTypeNumber", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": 0, "text": "a"}]}]})", 400},
      {"ChatResponseFormatTypeNumber", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": 1}})", 400},
      {"ChatTwoChoices", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "n": 2})", 400},
      {"ChatTools", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function"}]})", 400},
      {"ChatJsonSchema", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema"}})",
       400},
      {"ChatMaxTokensZero", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 0})", 400},
      {"ChatStreamOptionsWithoutStream", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "stream_options": {"include_usage": true}})", 400},
      {"ChatTopLogprobsWithoutLogprobs", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})", 400},
      {"CompletionNoPrompt", "POST", "/v1/completions", "{}", 400},
      {"CompletionTwoPrompts", "POST", "/v1/completions", R"({"prompt": ["a", "b"]})", 400},
      {"CompletionSuffix", "POST", "/v1/completions", R"({"prompt": "a", "suffix": "b"})", 400},
      {"CompletionTemperatureString", "POST", "/v1/completions", R"({"prompt": "a", "temperature": "x"})",
       400},
      {"PostOnModels", "POST", "/v1/models", "{}", 405},
      {"OversizedBody", "POST", "/generate", "{\"prompt\": \"" + std::string(1536 * 1024, 'a') + "\"}", 413},
      {"OversizedChat", "POST", "/v1/chat/completions",
       "{\"messages\": \"" + std::string(1536 * 1024, 'a') + "\"}", 413},
  };
}

class BadInput : public ::testing::TestWithParam<BadCase> {
 protected:
  static void SetUpTestSuite() {
    port_ = free_port();
    auto model = tiny_model(scratch_dir());  // per process: ctest runs the cases in parallel processes
    daemon_ = new DaemonProcess({"serve", "--model", model.string(), "--port", std::to_string(port_),
                                 "--cpu-reference", "--max-body-mb", "1"});
    ready_ = daemon_->wait_ready(port_);
  }
  // Checked here, not in SetUpTestSuite: a failure there makes gtest (and so ctest) report skipped tests.
  void SetUp() override { ASSERT_TRUE(ready_) << "the daemon did not start:\n" << daemon_->log(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static int port_;
  static bool ready_;
  static DaemonProcess* daemon_;
};

int BadInput::port_ = 0;
bool BadInput::ready_ = false;
DaemonProcess* BadInput::daemon_ = nullptr;

TEST_P(BadInput, AnswersTheRight4xxWithErrorJsonAndKeepsServing) {
  const BadCase& c = GetParam();
  ASSERT_NE(daemon_, nullptr);
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(10, 0);
  httplib::Result r = std::string(c.method) == "GET"      ? client.Get(c.path)
                      : std::string(c.method) == "DELETE" ? client.Delete(c.path)
                                                          : client.Post(c.path, c.body, "application/json");
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, c.status) << r->body;
  json err = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(err.is_object()) << r->body;
  ASSERT_TRUE(err.contains("error")) << r->body;
  EXPECT_EQ(err["error"]["code"], c.status);
  EXPECT_TRUE(err["error"]["type"].is_string());
  EXPECT_FALSE(err["error"]["message"].get<std::string>().empty());

  httplib::Client good("127.0.0.1", port_);
  auto ok =
      good.Post("/generate", R"({"prompt": "fine", "max_tokens": 2, "stream": false})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["done"], true);
}

INSTANTIATE_TEST_SUITE_P(Native, BadInput, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<BadCase>& p) {
                           return std::string(p.param.name);
                         });

TEST(BadInputTable, HasAtLeastFortyCases) {
  EXPECT_GE(cases().size(), 40u);
}

}  // namespace
}  // namespace kvtrie::test
