#include "harness/chat_prompt.h"

#include <algorithm>

#include "util/error.h"
#include "util/trim.h"

namespace kvc {

ChatRenderOptions chat_render_options(const Tokenizer& tokenizer, bool add_generation_prompt) {
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  if (const auto bos = tokenizer.bos_id()) options.bos_token = tokenizer.piece(*bos);
  if (const auto eos = tokenizer.eos_ids(); !eos.empty()) options.eos_token = tokenizer.piece(eos.front());
  return options;
}

std::vector<int> encode_rendered_chat(const Tokenizer& tokenizer, const std::string& rendered, BosChoice bos) {
  std::vector<int> ids = tokenizer.encode_with_specials(rendered);
  const std::optional<int> bos_id = tokenizer.bos_id();
  const bool starts_with_bos = bos_id && !ids.empty() && ids.front() == *bos_id;
  if (bos == BosChoice::Add && !starts_with_bos) {
    KVC_CHECK(bos_id.has_value(), "--bos: the tokenizer '{}' declares no BOS token", tokenizer.source());
    ids.insert(ids.begin(), *bos_id);
  } else if (bos == BosChoice::Omit && starts_with_bos) {
    ids.erase(ids.begin());
  }
  return ids;
}

namespace {

std::vector<ChatMessage> with_system(const ChatFormat& format, std::vector<ChatMessage> turns) {
  if (!format.system.empty()) turns.insert(turns.begin(), ChatMessage{"system", format.system});
  return turns;
}

}  // namespace

ChatTaskPrompt render_task_prompt(const ChatFormat& format, const Tokenizer& tokenizer, const std::string& context_part,
                                  const std::string& question_part) {
  KVC_CHECK(format.chat_template != nullptr, "render_task_prompt: no chat template");
  const ChatTemplate& chat = *format.chat_template;
  const ChatRenderOptions options = chat_render_options(tokenizer, true);
  // A mark between context and question shows where the rendering splits; it is made of control
  // characters no task text holds and no template transforms.
  static const std::string kMark = "\x1d\x1e\x1f";
  KVC_CHECK(context_part.find(kMark) == std::string::npos && question_part.find(kMark) == std::string::npos,
            "the task prompt holds the bytes 1D 1E 1F, which --chat uses to split it");
  const std::string marked =
      chat.render(with_system(format, {{"user", context_part + kMark + question_part}}), options);
  const size_t at = marked.find(kMark);
  KVC_CHECK(at != std::string::npos && marked.find(kMark, at + 1) == std::string::npos,
            "{}: the template does not keep the user's message whole, so --chat cannot keep the context and the "
            "question apart (pass --chat-template chatml|llama3|... to use another)",
            chat.origin());
  ChatTaskPrompt prompt{marked.substr(0, at), marked.substr(at + kMark.size())};
  const std::string plain = chat.render(with_system(format, {{"user", context_part + question_part}}), options);
  KVC_CHECK(prompt.before_question + prompt.from_question == plain,
            "{}: the template renders the message differently depending on its text, so --chat cannot keep the "
            "context and the question apart (pass --chat-template chatml|llama3|... to use another)",
            chat.origin());
  return prompt;
}

ChatSession::ChatSession(ChatFormat format, const Tokenizer& tokenizer, BosChoice bos)
    : format_(std::move(format)), tokenizer_(tokenizer), bos_(bos) {
  KVC_CHECK(format_.chat_template != nullptr, "ChatSession: no chat template");
}

std::vector<int> ChatSession::user_turn(const std::string& message) {
  messages_.push_back({"user", message});
  const std::string full =
      format_.chat_template->render(with_system(format_, messages_), chat_render_options(tokenizer_, true));
  if (fed_text_.empty()) {
    fed_text_ = full;
    return encode_rendered_chat(tokenizer_, full, bos_);
  }
  // The cache holds fed_text_; the new rendering must continue it. A template may trim or reshape the
  // last reply (Gemma's trims each message): the cache keeps the reply as generated, and what follows
  // the template's rendition of it is fed.
  size_t cut = fed_text_.size();
  if (full.compare(0, fed_text_.size(), fed_text_) != 0) {
    const std::string reply = trim(messages_[messages_.size() - 2].content, " \t\n\r\f\v");
    const bool earlier_same = full.compare(0, reply_start_, fed_text_, 0, reply_start_) == 0;
    const size_t at = earlier_same ? full.find(reply, reply_start_) : std::string::npos;
    KVC_CHECK(at != std::string::npos,
              "{}: the template renders the earlier turns of the conversation differently once a turn is added; "
              "kvc keeps one cache for the whole conversation and cannot take back what it holds (pass "
              "--chat-template chatml|llama3|... to use another template)",
              format_.chat_template->origin());
    cut = at + reply.size();
  }
  const std::string added = full.substr(cut);
  fed_text_ = full;
  return tokenizer_.encode_with_specials(added);
}

void ChatSession::assistant_turn(const std::string& reply) {
  messages_.push_back({"assistant", reply});
  reply_start_ = fed_text_.size();
  fed_text_ += reply;
}

}  // namespace kvc
