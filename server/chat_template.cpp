#include "server/chat_template.h"

namespace kvtrie::server {

const char* chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::ChatML: return "chatml";
    case ChatTemplate::Llama3: return "llama3";
    case ChatTemplate::Llama2: return "llama2";
    case ChatTemplate::Mistral: return "mistral";
  }
  return "chatml";
}

std::optional<ChatTemplate> chat_template_from_name(std::string_view name) {
  if (name == "chatml") return ChatTemplate::ChatML;
  if (name == "llama3" || name == "llama-3") return ChatTemplate::Llama3;
  if (name == "llama2" || name == "llama-2" || name == "llama2-sys") return ChatTemplate::Llama2;
  if (name == "mistral" || name == "mistral-v1" || name == "mistral-v3" || name == "mistral-v7") return ChatTemplate::Mistral;
  return std::nullopt;
}

ChatTemplate detect_chat_template(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<|start_header_id|>")) return ChatTemplate::Llama3;
  if (has("<|im_start|>")) return ChatTemplate::ChatML;
  if (has("[INST]") && has("<<SYS>>")) return ChatTemplate::Llama2;
  if (has("[INST]")) return ChatTemplate::Mistral;
  return ChatTemplate::ChatML;
}

namespace {

// Llama 2 and Mistral have no system role: the system text is folded into the first user turn.
std::string render_inst(const std::vector<ChatMessage>& messages, bool llama2) {
  std::string system, out;
  bool first_user = true;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n") + m.content;
    } else if (m.role == "assistant") {
      out += (llama2 ? " " : "") + m.content + "</s>";
    } else {
      std::string text = m.content;
      if (first_user && !system.empty())
        text = llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + text : system + "\n\n" + text;
      // After the first turn each new [INST] begins a new sequence in the original format.
      if (!first_user) out += llama2 ? "<s>" : "";
      out += "[INST] " + text + " [/INST]";
      first_user = false;
    }
  }
  return out;
}

}  // namespace

std::string apply_chat_template(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  switch (t) {
    case ChatTemplate::ChatML:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatTemplate::Llama3:
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatTemplate::Llama2: return render_inst(messages, true);
    case ChatTemplate::Mistral: return render_inst(messages, false);
  }
  return out;
}

std::vector<std::string> chat_stop_strings(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::ChatML: return {"<|im_end|>"};
    case ChatTemplate::Llama3: return {"<|eot_id|>"};
    case ChatTemplate::Llama2:
    case ChatTemplate::Mistral: return {"</s>"};
  }
  return {};
}

}  // namespace kvtrie::server
