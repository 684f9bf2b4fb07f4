// libFuzzer target: the chat formats on arbitrary roles and contents. FuzzedDataProvider picks a family, a
// default system message, the render options and the messages; a second part of the input is fed to
// detect_chat_format and chat_template_from_name as a model's Jinja source and a --chat-template name.
// Checks chat_template.h's promise: a conversation ending in a user message, rendered up to that message (no
// generation prompt, which the contract lets depend on later messages: Qwen3's empty <think> block), is a
// prefix of the same conversation with one more assistant reply and user message (what lets the prefix cache
// serve earlier turns). A failed check aborts, which libFuzzer reports as a crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "server/chat_template.h"

using kvtrie::server::ChatMessage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvtrie::server::ChatFormat format;
  format.family = static_cast<kvtrie::server::ChatTemplate>(in.ConsumeIntegralInRange<int>(0, 5));
  format.default_system = in.ConsumeRandomLengthString(64);
  kvtrie::server::RenderOptions options;
  options.add_generation_prompt = in.ConsumeBool();
  options.enable_thinking = in.ConsumeBool();
  static const char* const kRoles[] = {"system", "user", "assistant"};
  std::vector<ChatMessage> messages;
  const int n = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < n; ++i) {
    ChatMessage m;
    const int pick = in.ConsumeIntegralInRange<int>(0, 3);
    m.role = pick < 3 ? kRoles[pick] : in.ConsumeRandomLengthString(16);
    m.content = in.ConsumeRandomLengthString(256);
    messages.push_back(std::move(m));
  }
  const std::string rendered = kvtrie::server::render_chat(format, messages, options);
  volatile size_t sink = rendered.size() + kvtrie::server::chat_stop_strings(format.family).size();

  // The prefix property, over the roles every format knows.
  const bool known_roles = std::all_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    return m.role == "system" || m.role == "user" || m.role == "assistant";
  });
  if (known_roles && !messages.empty() && messages.back().role == "user") {
    kvtrie::server::RenderOptions before_options = options, next_options = options;
    before_options.add_generation_prompt = false;
    next_options.add_generation_prompt = true;
    const std::string before = kvtrie::server::render_chat(format, messages, before_options);
    std::vector<ChatMessage> longer = messages;
    longer.push_back({"assistant", in.ConsumeRandomLengthString(64)});
    longer.push_back({"user", in.ConsumeRandomLengthString(64)});
    const std::string after = kvtrie::server::render_chat(format, longer, next_options);
    if (after.rfind(before, 0) != 0) {
      fprintf(stderr, "fuzz_chat_template: %s: the earlier turn's prompt is not a prefix\n%s\n---\n%s\n",
              kvtrie::server::chat_template_name(format.family), before.c_str(), after.c_str());
      std::abort();
    }
  }

  const std::string jinja = in.ConsumeRemainingBytesAsString();
  if (auto detected = kvtrie::server::detect_chat_format(jinja))
    sink = sink + detected->default_system.size();
  if (auto named = kvtrie::server::chat_template_from_name(jinja)) sink = sink + static_cast<size_t>(*named);
  (void)sink;
  return 0;
}
