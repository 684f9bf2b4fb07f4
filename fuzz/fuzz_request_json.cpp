// libFuzzer target: request bodies of every HTTP API, through the pure functions the handlers call
// (server/request_json.h, server/generate_request.h): parse_object, then the native /generate, OpenAI chat
// and completions, llama-server /completion and Ollama runner /completion parsers, on a small SentencePiece
// vocabulary and a context of 64 tokens. A bad body must end in ApiError; any other exception (libFuzzer
// reports an uncaught one as a crash), a crash or a sanitizer report is a finding. A request that parses
// must satisfy what the engine relies on: a non-empty prompt of in-vocabulary ids that fits the context.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "server/generate_request.h"
#include "server/http_types.h"

namespace {

using kvtrie::engine::GenerateRequest;

void check_request(const GenerateRequest& req, const kvtrie::server::RequestModel& model) {
  bool ok = !req.prompt.empty() && req.prompt.size() < model.n_ctx && req.logprobs <= 20;
  for (const int32_t id : req.prompt) ok = ok && id >= 0 && id < model.tokenizer.n_vocab();
  if (!ok) {
    fprintf(stderr, "fuzz_request_json: a parsed request breaks the engine's preconditions\n");
    std::abort();
  }
}

template <typename Parse>
void run(Parse&& parse) {
  try {
    parse();
  } catch (const kvtrie::server::ApiError& e) {
    if (e.type() != kvtrie::server::ErrorType::InvalidRequest) std::abort();  // parsing only refuses
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kvtrie::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<kvtrie::Tokenizer> tokenizer =
      kvtrie::fuzz::load_tokenizer(kvtrie::fuzz::spm_vocab());
  static const kvtrie::server::ChatFormat chat_format{kvtrie::server::ChatTemplate::ChatML, "Be brief."};
  const kvtrie::server::RequestModel model{*tokenizer, 64, chat_format};
  namespace s = kvtrie::server;

  kvtrie::server::Json body;
  try {
    body = s::parse_object(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const s::ApiError&) {
    return 0;
  }
  run([&] { check_request(s::parse_native_generate(body, model).request, model); });
  run([&] { check_request(s::parse_openai_chat(body, model).request, model); });
  run([&] { check_request(s::parse_openai_completion(body, model).request, model); });
  run([&] { check_request(s::parse_llama_completion(body, model).request, model); });
  run([&] { check_request(s::parse_ollama_runner_completion(body, model), model); });
  run([&] {
    volatile size_t n = s::chat_prompt(chat_format, body).size();
    (void)n;
  });
  return 0;
}
