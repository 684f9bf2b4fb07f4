// Contract: every generation API's request body -> engine::GenerateRequest plus the API's own answer options
// (native /generate, OpenAI chat and completions, llama-server /completion, Ollama's runner /completion), as
// pure functions of the parsed JSON body and a RequestModel: the little they need of the loaded model (its
// tokenizer, context size and chat format). Every refusal is ApiError(InvalidRequest) naming the field;
// nothing else is thrown. Pure; any thread. The HTTP handlers call these, and so does the libFuzzer target
// fuzz/fuzz_request_json.cpp, which is why they live apart from the handlers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/engine/engine.h"
#include "runner/sampler.h"
#include "runner/tokenizer/tokenizer.h"
#include "server/chat_template.h"
#include "server/request_json.h"

namespace kvtrie::server {

// Prompts longer than this many bytes are refused before tokenization.
inline constexpr size_t kMaxPromptBytes = 4u << 20;

// What request parsing needs of the model; the referenced objects must outlive the call.
struct RequestModel {
  const Tokenizer& tokenizer;
  uint32_t n_ctx;
  const ChatFormat& chat_format;
};

// Reads temperature, top_k, top_p, min_p, typical_p, repeat_penalty, repeat_last_n, presence_penalty,
// frequency_penalty and seed from `obj` (same key names in every API) into `params`.
void read_sampling(const Json& obj, SamplingParams& params);

// A text prompt -> tokens (add_special: BOS as the vocab wants, or as forced by add_bos), refusing empty,
// invalid UTF-8 and over-long prompts. A token-array prompt is checked against the vocabulary.
std::vector<int32_t> tokenize_prompt(const Tokenizer& tokenizer, const Json& prompt, const char* key,
                                     std::optional<bool> add_bos, bool parse_special);

// Refuses prompts that leave no room in the context.
void check_fits(uint32_t n_ctx, const engine::GenerateRequest& request);

// The prompt text of a chat request body ("messages" with system/user/assistant/developer roles and string or
// text-part contents; "chat_template_kwargs": {"enable_thinking": bool}) in the given chat format.
// llama-server's /apply-template answers with it too.
std::string chat_prompt(const ChatFormat& format, const Json& body);

// POST /generate.
struct NativeGenerate {
  engine::GenerateRequest request;
  bool stream = true;
};
NativeGenerate parse_native_generate(const Json& body, const RequestModel& model);

// POST /v1/chat/completions and /v1/completions.
struct OpenAiRequest {
  engine::GenerateRequest request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  std::string echoed;  // completions with "echo": the prompt text the answer starts with
};
OpenAiRequest parse_openai_chat(const Json& body, const RequestModel& model);
OpenAiRequest parse_openai_completion(const Json& body, const RequestModel& model);

// llama-server's POST /completion.
struct LlamaCompletion {
  engine::GenerateRequest request;
  bool stream = false;
};
LlamaCompletion parse_llama_completion(const Json& body, const RequestModel& model);

// Ollama's runner protocol, POST /completion (capitalised keys, sampling under "Options").
engine::GenerateRequest parse_ollama_runner_completion(const Json& body, const RequestModel& model);

}  // namespace kvtrie::server
