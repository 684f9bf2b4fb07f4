// Contract: the built-in chat templates (ChatML, Llama 3, Llama 2, Mistral) that turn a list of chat
// messages into one prompt string, and the heuristics that pick one from a model's tokenizer.chat_template
// metadata (a Jinja source we do not execute) or from a --chat-template name. Pure functions; any thread.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtrie::server {

enum class ChatTemplate { ChatML, Llama3, Llama2, Mistral };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (others are rendered as given where the format allows)
  std::string content;
};

const char* chat_template_name(ChatTemplate t);
// "chatml", "llama3", "llama2", "mistral" (and a few aliases); nullopt for an unknown name.
std::optional<ChatTemplate> chat_template_from_name(std::string_view name);
// Guesses the family from the model's Jinja template text; ChatML when nothing matches.
ChatTemplate detect_chat_template(std::string_view jinja_source);

// Renders the conversation; with add_generation_prompt the text ends where the assistant's reply begins.
// Begin-of-sequence tokens are not written: the tokenizer adds BOS.
std::string apply_chat_template(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

// Strings that end an assistant turn in this format (used as extra stop strings).
std::vector<std::string> chat_stop_strings(ChatTemplate t);

}  // namespace kvtrie::server
