#include "server/chat_template.h"

#include <array>
#include <utility>

namespace kvtrie::server {

namespace {

struct NamedTemplate {
  const char* name;
  ChatTemplate family;
};

// Canonical names first (chat_template_name reads the first row of each family), then aliases, some of them
// llama.cpp's names for the same formats.
constexpr std::array kNames = {
    NamedTemplate{"chatml", ChatTemplate::ChatML},      NamedTemplate{"qwen3", ChatTemplate::Qwen3},
    NamedTemplate{"llama3", ChatTemplate::Llama3},      NamedTemplate{"llama2", ChatTemplate::Llama2},
    NamedTemplate{"mistral", ChatTemplate::Mistral},    NamedTemplate{"gemma", ChatTemplate::Gemma},
    NamedTemplate{"llama-3", ChatTemplate::Llama3},     NamedTemplate{"llama-2", ChatTemplate::Llama2},
    NamedTemplate{"llama2-sys", ChatTemplate::Llama2},  NamedTemplate{"mistral-v1", ChatTemplate::Mistral},
    NamedTemplate{"mistral-v3", ChatTemplate::Mistral}, NamedTemplate{"mistral-v7", ChatTemplate::Mistral},
    NamedTemplate{"gemma2", ChatTemplate::Gemma},       NamedTemplate{"gemma3", ChatTemplate::Gemma},
};
constexpr size_t kCanonicalNames = 6;

std::string_view trim(std::string_view s, std::string_view chars = " \t\n\r") {
  const size_t first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

std::string_view ltrim(std::string_view s, std::string_view chars) {
  const size_t first = s.find_first_not_of(chars);
  return first == std::string_view::npos ? std::string_view{} : s.substr(first);
}

std::string_view rtrim(std::string_view s, std::string_view chars) {
  const size_t last = s.find_last_not_of(chars);
  return last == std::string_view::npos ? std::string_view{} : s.substr(0, last + 1);
}

// Qwen2 and Qwen2.5 templates write a fixed system message when the conversation has none, as one Jinja
// string literal: '<|im_start|>system\nYou are ...<|im_end|>\n' (the \n is written as a backslash and an n).
// The first such literal whose text is constant (no quote, no expression) is that default.
std::string default_system_of(std::string_view src) {
  constexpr std::string_view kOpen = "<|im_start|>system\\n";
  constexpr std::string_view kClose = "<|im_end|>";
  for (size_t at = src.find(kOpen); at != std::string_view::npos; at = src.find(kOpen, at + 1)) {
    const size_t begin = at + kOpen.size();
    const size_t end = src.find(kClose, begin);
    if (end == std::string_view::npos) break;
    const std::string_view text = src.substr(begin, end - begin);
    if (text.empty() || text.find_first_of("'\"{}+") != std::string_view::npos) continue;
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
        out += '\n';
        ++i;
      } else {
        out += text[i];
      }
    }
    return out;
  }
  return {};
}

std::string render_chatml(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                          const RenderOptions& options) {
  std::string out;
  if (!format.default_system.empty() && (messages.empty() || messages.front().role != "system"))
    out += "<|im_start|>system\n" + format.default_system + "<|im_end|>\n";
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen3's template: an assistant message's "<think>...</think>" reasoning is kept only after the last user
// message (the turn in progress) and dropped from earlier turns, as the model was trained. Earlier prompts
// stay prefixes: what a turn's prompt rendered ends at the generation prompt, before any reasoning.
std::string render_qwen3(const std::vector<ChatMessage>& messages, const RenderOptions& options) {
  size_t last_user = 0;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_user = i;
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "assistant") {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
      std::string_view before = rtrim(content.substr(0, close), "\n");
      const size_t open = before.rfind("<think>");
      reasoning = ltrim(open == std::string_view::npos ? before : before.substr(open + 7), "\n");
      content = ltrim(content.substr(content.rfind("</think>") + 8), "\n");
    }
    out += "<|im_start|>assistant\n";
    if (i > last_user && (i + 1 == messages.size() || !reasoning.empty())) {
      out += "<think>\n";
      out += trim(reasoning, "\n");
      out += "\n</think>\n\n";
    }
    out += std::string(content) + "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& messages, const RenderOptions& options) {
  std::string out;
  for (const auto& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + std::string(trim(m.content)) +
           "<|eot_id|>";
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The system messages, joined; Llama 2, Mistral and Gemma have no system turn and fold it into the first user
// message (never a later one, so that earlier turns render the same when the conversation grows).
std::string joined_system(const std::vector<ChatMessage>& messages) {
  std::string system;
  for (const auto& m : messages)
    if (m.role == "system") system += (system.empty() ? "" : "\n") + m.content;
  return system;
}

// Llama 2, as Meta's reference code builds it: "[INST] {user} [/INST] {answer} </s>" per exchange, each
// later exchange opening with BOS, the system prompt in <<SYS>> inside the first.
std::string render_llama2(const std::vector<ChatMessage>& messages, const RenderOptions&) {
  const std::string system = joined_system(messages);
  std::string out;
  bool first_user = true;
  for (const auto& m : messages) {
    if (m.role == "system") continue;
    // Appended piece by piece here and below: GCC 12 at -O3 reports a bogus -Wrestrict for
    // `const char* + std::string&&` (an insert at the front).
    if (m.role == "assistant") {
      out += ' ';
      out += trim(m.content);
      out += " </s>";
      continue;
    }
    std::string text(trim(m.content));
    if (first_user && !system.empty()) text = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + text;
    if (!first_user) out += "<s>";
    out += "[INST] ";
    out += trim(text);
    out += " [/INST]";
    first_user = false;
  }
  return out;
}

// Mistral 7B Instruct's model card: "[INST] {user} [/INST]{answer}</s> [INST] {user} [/INST]".
std::string render_mistral(const std::vector<ChatMessage>& messages, const RenderOptions&) {
  const std::string system = joined_system(messages);
  std::string out;
  bool first_user = true;
  for (const auto& m : messages) {
    if (m.role == "system") continue;
    if (m.role == "assistant") {
      out += m.content + "</s>";
      continue;
    }
    if (!out.empty()) out += ' ';
    out += "[INST] ";
    if (first_user && !system.empty()) out += system + "\n\n";
    out += m.content;
    out += " [/INST]";
    first_user = false;
  }
  return out;
}

// Gemma 2 and 3: roles user and model; Gemma 3's template puts the system text at the head of the first user
// turn, separated by a blank line.
std::string render_gemma(const std::vector<ChatMessage>& messages, const RenderOptions& options) {
  const std::string system = joined_system(messages);
  std::string out;
  bool first_user = true;
  for (const auto& m : messages) {
    if (m.role == "system") continue;
    const bool model = m.role == "assistant";
    std::string text(trim(m.content));
    if (!model && first_user && !system.empty()) text = system + "\n\n" + text;
    if (!model) first_user = false;
    out += model ? "<start_of_turn>model\n" : "<start_of_turn>user\n";
    out += text + "<end_of_turn>\n";
  }
  if (options.add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

const char* chat_template_name(ChatTemplate t) {
  for (size_t i = 0; i < kCanonicalNames; ++i)
    if (kNames[i].family == t) return kNames[i].name;
  return "chatml";
}

std::optional<ChatTemplate> chat_template_from_name(std::string_view name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.family;
  return std::nullopt;
}

std::string chat_template_names() {
  std::string out;
  for (size_t i = 0; i < kCanonicalNames; ++i) out += (i ? ", " : "") + std::string(kNames[i].name);
  return out;
}

std::optional<ChatFormat> detect_chat_format(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<|start_header_id|>")) return ChatFormat{ChatTemplate::Llama3, {}};
  if (has("<|im_start|>")) {
    if (has("<think>")) return ChatFormat{ChatTemplate::Qwen3, {}};
    return ChatFormat{ChatTemplate::ChatML, default_system_of(src)};
  }
  if (has("<start_of_turn>")) return ChatFormat{ChatTemplate::Gemma, {}};
  if (has("[INST]") && has("<<SYS>>")) return ChatFormat{ChatTemplate::Llama2, {}};
  if (has("[INST]")) return ChatFormat{ChatTemplate::Mistral, {}};
  return std::nullopt;
}

std::string render_chat(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                        const RenderOptions& options) {
  switch (format.family) {
    case ChatTemplate::ChatML:
      return render_chatml(format, messages, options);
    case ChatTemplate::Qwen3:
      return render_qwen3(messages, options);
    case ChatTemplate::Llama3:
      return render_llama3(messages, options);
    case ChatTemplate::Llama2:
      return render_llama2(messages, options);
    case ChatTemplate::Mistral:
      return render_mistral(messages, options);
    case ChatTemplate::Gemma:
      return render_gemma(messages, options);
  }
  return render_chatml(format, messages, options);
}

std::vector<std::string> chat_stop_strings(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::ChatML:
    case ChatTemplate::Qwen3:
      return {"<|im_end|>"};
    case ChatTemplate::Llama3:
      return {"<|eot_id|>"};
    case ChatTemplate::Llama2:
    case ChatTemplate::Mistral:
      return {"</s>"};
    case ChatTemplate::Gemma:
      return {"<end_of_turn>"};
  }
  return {};
}

}  // namespace kvtrie::server
