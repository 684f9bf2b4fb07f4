// The built-in chat formats: each family renders a 3-message conversation exactly as its model card documents
// the prompt format (strings written out by hand, BOS left to the tokenizer), a GGUF's Jinja template picks
// the right family, and every family keeps an earlier turn's prompt a prefix of the next turn's (what lets
// the prefix cache serve the earlier turns).
#include <gtest/gtest.h>

#include "server/chat_template.h"

namespace kvtrie::server {
namespace {

const std::vector<ChatMessage> kThree = {
    {"system", "You are a helpful assistant."},
    {"user", "What is the capital of France?"},
    {"assistant", "The capital of France is Paris."},
};

std::string history(ChatTemplate t) {
  RenderOptions o;
  o.add_generation_prompt = false;
  return render_chat({t, {}}, kThree, o);
}

TEST(ChatTemplate, ChatMLAsQwen2AndQwen25CardsShowIt) {
  EXPECT_EQ(history(ChatTemplate::ChatML),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\nThe capital of France is Paris.<|im_end|>\n");
  EXPECT_EQ(render_chat({ChatTemplate::ChatML, {}}, {kThree[0], kThree[1]}),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// Qwen3's template: the assistant turn after the last user message carries a (here empty) think block;
// reasoning in an earlier assistant turn is dropped.
TEST(ChatTemplate, Qwen3ThinkBlocks) {
  EXPECT_EQ(history(ChatTemplate::Qwen3),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nThe capital of France is Paris.<|im_end|>\n");
  const std::vector<ChatMessage> turns = {
      {"user", "2+2?"}, {"assistant", "<think>\nAdd them.\n</think>\n\n4"}, {"user", "3+3?"}};
  EXPECT_EQ(render_chat({ChatTemplate::Qwen3, {}}, turns),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n");
  RenderOptions no_thinking;
  no_thinking.enable_thinking = false;
  EXPECT_EQ(render_chat({ChatTemplate::Qwen3, {}}, {turns[0]}, no_thinking),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, Llama3AsMetasPromptFormatShowsIt) {
  EXPECT_EQ(history(ChatTemplate::Llama3),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nThe capital of France is Paris.<|eot_id|>");
}

TEST(ChatTemplate, Llama2AsMetasReferenceCodeBuildsIt) {
  EXPECT_EQ(
      history(ChatTemplate::Llama2),
      "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nWhat is the capital of France? [/INST] "
      "The capital of France is Paris. </s>");
  EXPECT_EQ(render_chat({ChatTemplate::Llama2, {}}, {kThree[1], kThree[2], {"user", "And of Spain?"}}),
            "[INST] What is the capital of France? [/INST] The capital of France is Paris. </s>"
            "<s>[INST] And of Spain? [/INST]");
}

TEST(ChatTemplate, MistralAsItsModelCardShowsIt) {
  EXPECT_EQ(history(ChatTemplate::Mistral),
            "[INST] You are a helpful assistant.\n\nWhat is the capital of France? [/INST]"
            "The capital of France is Paris.</s>");
  EXPECT_EQ(render_chat({ChatTemplate::Mistral, {}}, {kThree[1], kThree[2], {"user", "And of Spain?"}}),
            "[INST] What is the capital of France? [/INST]The capital of France is Paris.</s> "
            "[INST] And of Spain? [/INST]");
}

TEST(ChatTemplate, GemmaAsItsModelCardShowsIt) {
  EXPECT_EQ(
      history(ChatTemplate::Gemma),
      "<start_of_turn>user\nYou are a helpful assistant.\n\nWhat is the capital of France?<end_of_turn>\n"
      "<start_of_turn>model\nThe capital of France is Paris.<end_of_turn>\n");
  EXPECT_EQ(render_chat({ChatTemplate::Gemma, {}}, {kThree[1]}),
            "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n");
}

// Excerpts of the templates these families ship in their GGUF files (tokenizer.chat_template).
TEST(ChatTemplate, DetectsTheFamilyFromTheModelsJinjaTemplate) {
  struct Case {
    const char* source;
    ChatTemplate family;
    const char* default_system;
  };
  const Case cases[] = {
      {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' %}",
       ChatTemplate::Llama3, ""},
      {"{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
       "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You "
       "are a "
       "helpful assistant.<|im_end|>\\n' }}{%- endif %}",
       ChatTemplate::ChatML, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
      {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
       "'<|im_end|>' + '\\n'}}{% endfor %}",
       ChatTemplate::ChatML, ""},
      {"{%- if reasoning_content %}{{- '<|im_start|>' + message.role + '\\n<think>\\n' }}",
       ChatTemplate::Qwen3, ""},
      {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}",
       ChatTemplate::Gemma, ""},
      {"{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' %}{{ bos_token + '[INST] ' }}",
       ChatTemplate::Llama2, ""},
      {"{{ '[INST] ' + message['content'] + ' [/INST]' }}", ChatTemplate::Mistral, ""},
  };
  for (const auto& c : cases) {
    auto f = detect_chat_format(c.source);
    ASSERT_TRUE(f) << c.source;
    EXPECT_EQ(f->family, c.family) << c.source;
    EXPECT_EQ(f->default_system, c.default_system) << c.source;
  }
  EXPECT_FALSE(detect_chat_format("{{ '<｜User｜>' + message['content'] }}"));
  EXPECT_FALSE(detect_chat_format(""));
}

TEST(ChatTemplate, TheDefaultSystemMessageIsRenderedOnlyWithoutOne) {
  const ChatFormat qwen25{ChatTemplate::ChatML, "You are Qwen."};
  EXPECT_EQ(
      render_chat(qwen25, {{"user", "Hi"}}),
      "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(
      render_chat(qwen25, {{"system", "Be brief."}, {"user", "Hi"}}),
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, NamesRoundTripAndAliasesResolve) {
  for (auto t : {ChatTemplate::ChatML, ChatTemplate::Qwen3, ChatTemplate::Llama3, ChatTemplate::Llama2,
                 ChatTemplate::Mistral, ChatTemplate::Gemma})
    EXPECT_EQ(chat_template_from_name(chat_template_name(t)), t);
  EXPECT_EQ(chat_template_from_name("llama-3"), ChatTemplate::Llama3);
  EXPECT_FALSE(chat_template_from_name("jinja"));
  EXPECT_EQ(chat_template_names(), "chatml, qwen3, llama3, llama2, mistral, gemma");
}

// A conversation re-sent with the reply and one more user message must render the earlier prompt unchanged
// (as its prefix), or the prefix cache could not serve the earlier turns.
TEST(ChatTemplate, EveryFamilyKeepsTheEarlierTurnsPromptAsAPrefix) {
  const std::vector<std::string> replies = {"<think>\nGreet.\n</think>\n\nHello!", " Fine, thanks. ", "Bye."};
  for (auto t : {ChatTemplate::ChatML, ChatTemplate::Qwen3, ChatTemplate::Llama3, ChatTemplate::Llama2,
                 ChatTemplate::Mistral, ChatTemplate::Gemma}) {
    for (bool with_system : {true, false}) {
      const ChatFormat format{t, "Default system."};
      std::vector<ChatMessage> turns = {{"user", "Hi there"}};
      if (with_system) turns.insert(turns.begin(), {"system", "Be brief."});
      std::string previous = render_chat(format, turns);
      for (const auto& reply : replies) {
        turns.push_back({"assistant", reply});
        turns.push_back({"user", "and then?"});
        const std::string next = render_chat(format, turns);
        EXPECT_EQ(next.rfind(previous, 0), 0u) << chat_template_name(t) << ":\n"
                                               << previous << "\n---\n"
                                               << next;
        previous = next;
      }
    }
  }
}

}  // namespace
}  // namespace kvtrie::server
