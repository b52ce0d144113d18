#pragma once
// Prompts through a model's chat template (chat/chat_template.h): a task prompt as one user turn whose
// context and question stay separable, and a conversation whose turns go into one cache as they come.
// A rendered chat is tokenized as transformers tokenizes it (apply_chat_template): the control tokens it
// spells out are taken whole and no BOS is added, since a template that wants BOS writes bos_token
// itself; --bos / --no-bos still add or drop a leading BOS.
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvc {

struct ChatFormat {
  std::shared_ptr<const ChatTemplate> chat_template;
  std::string system;  // a system message before the first user turn, when not empty
};

// What a template sees besides the messages: the tokenizer's BOS and EOS as its vocabulary spells them.
ChatRenderOptions chat_render_options(const Tokenizer& tokenizer, bool add_generation_prompt);

// The ids of a rendered chat (control tokens whole), with a leading BOS added or dropped as `bos` says.
std::vector<int> encode_rendered_chat(const Tokenizer& tokenizer, const std::string& rendered, BosChoice bos);

// A task prompt rendered as one user turn, context then question, with the assistant's turn opened:
// `before_question` is the template's opening and the context, `from_question` the question, the
// template's end of turn and the assistant header. Together they are exactly the rendering of the turn
// "context + question". kvc::Error when the template does not keep the message whole.
struct ChatTaskPrompt {
  std::string before_question, from_question;
};
ChatTaskPrompt render_task_prompt(const ChatFormat& format, const Tokenizer& tokenizer, const std::string& context_part,
                                  const std::string& question_part);

// A conversation fed to one cache: each user turn yields the ids to append to what the cache holds, the
// rendering of the conversation so far with the assistant's turn opened, past the text already fed.
class ChatSession {
 public:
  ChatSession(ChatFormat format, const Tokenizer& tokenizer, BosChoice bos);

  // The ids to feed for the next user message (the whole rendered prompt on the first turn). kvc::Error
  // when the template renders the earlier turns differently once this one is added (a cache cannot
  // take back what it holds).
  std::vector<int> user_turn(const std::string& message);
  // The reply generated for the last user turn, as text: the cache holds its tokens, without the end of
  // turn that stopped it; the next turn's ids start with the template's own end of turn.
  void assistant_turn(const std::string& reply);
  const std::vector<ChatMessage>& messages() const { return messages_; }

 private:
  ChatFormat format_;
  const Tokenizer& tokenizer_;
  BosChoice bos_;
  std::vector<ChatMessage> messages_;
  std::string fed_text_;    // the rendered text whose tokens the cache holds
  size_t reply_start_ = 0;  // where the last reply begins in fed_text_ (a template may trim it)
};

}  // namespace kvc
