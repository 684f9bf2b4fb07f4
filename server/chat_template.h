// Contract: the built-in chat formats that turn a list of chat messages into one prompt string, and the
// heuristics that pick one from a model's tokenizer.chat_template metadata (a Jinja source we do not
// execute) or from a --chat-template name. Every format renders a conversation so that the prompt of an
// earlier turn is a prefix of the next turn's (the prefix cache then serves the earlier turns): nothing
// rendered for a message depends on the messages after it, except what follows the last user message.
// Pure functions; any thread.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtrie::server {

enum class ChatTemplate {
  ChatML,   // <|im_start|>role\n...<|im_end|>\n: Qwen2, Qwen2.5, SmolLM, many fine-tunes
  Qwen3,    // ChatML with <think> blocks: reasoning is dropped from earlier assistant turns
  Llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>: Llama 3, 3.1, 3.2, 3.3
  Llama2,   // [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s><s>
  Mistral,  // [INST] ... [/INST]...</s>: Mistral 7B Instruct, Mixtral
  Gemma,    // <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n: Gemma 2 and 3
};

// A chat format: the family and what the model's template adds by itself.
struct ChatFormat {
  ChatTemplate family = ChatTemplate::ChatML;
  // Rendered as the system message when the conversation has none (Qwen2 and Qwen2.5 templates do this).
  std::string default_system;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (others are rendered as given where the format allows)
  std::string content;
};

struct RenderOptions {
  bool add_generation_prompt = true;  // end where the assistant's reply begins
  bool enable_thinking = true;        // Qwen3: false opens the reply with an empty <think> block
};

const char* chat_template_name(ChatTemplate t);
// "chatml", "qwen3", "llama3", "llama2", "mistral", "gemma" (and a few aliases); nullopt for an unknown name.
std::optional<ChatTemplate> chat_template_from_name(std::string_view name);
// The names chat_template_from_name() accepts, for messages: "chatml, qwen3, ...".
std::string chat_template_names();

// The format of a model's Jinja template text, or nullopt when no family matches (the caller falls back to
// ChatML and says so).
std::optional<ChatFormat> detect_chat_format(std::string_view jinja_source);

// Renders the conversation. Begin-of-sequence tokens are not written: the tokenizer adds BOS.
std::string render_chat(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                        const RenderOptions& options = {});

// Strings that end an assistant turn in this format (used as extra stop strings).
std::vector<std::string> chat_stop_strings(ChatTemplate t);

}  // namespace kvtrie::server
