// Prompts through chat templates (harness/chat_prompt.h), on the committed Qwen-2-style tokenizer (its
// <|im_start|> and <|im_end|> are special tokens): a conversation fed turn by turn to one cache holds
// exactly the tokens of the whole conversation's rendering, and a task prompt splits where its question
// starts.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "harness/chat_prompt.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace kvc {
namespace {

const Tokenizer& qwen_style() {
  static const Tokenizer t =
      Tokenizer::load(std::string(KVC_SOURCE_DIR) + "/data/tokenizers/qwen2-style/tokenizer.json");
  return t;
}

ChatFormat builtin(const std::string& name, const std::string& system = "") {
  return {std::make_shared<const ChatTemplate>(ChatTemplate::parse(*builtin_chat_template(name), name)), system};
}

std::vector<int> cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ChatSession, FeedsWhatTheWholeConversationTokenizesTo) {
  for (const std::string& system : {std::string(), std::string("You are terse.")}) {
    SCOPED_TRACE(system.empty() ? "no system message" : "with a system message");
    const ChatFormat format = builtin("chatml", system);
    ChatSession session(format, qwen_style(), BosChoice::FromFile);
    const std::vector<int> first = session.user_turn("Hello there");
    const std::string reply = "Hi! How can I help?";
    session.assistant_turn(reply);
    const std::vector<int> second = session.user_turn("Tell me a story.");
    std::vector<ChatMessage> all{{"user", "Hello there"}, {"assistant", reply}, {"user", "Tell me a story."}};
    if (!system.empty()) all.insert(all.begin(), {"system", system});
    const std::string whole = format.chat_template->render(all, chat_render_options(qwen_style(), true));
    // The cache holds the first prompt, the reply as generated (without its end of turn), then the second
    // turn's ids, which start with the template's end of turn.
    EXPECT_EQ(cat(cat(first, qwen_style().encode(reply)), second), qwen_style().encode_with_specials(whole));
    EXPECT_EQ(second.front(), *qwen_style().piece_to_id("<|im_end|>"));
  }
}

// Gemma's template trims each message: the reply stays in the cache as generated, and the next turn
// starts with what follows the template's rendition of it.
TEST(ChatSession, AReplyTheTemplateTrimsIsNotFedTwice) {
  ChatSession session(builtin("gemma"), qwen_style(), BosChoice::FromFile);
  session.user_turn("What is the capital of France?");
  session.assistant_turn(" Paris.\n");
  const std::vector<int> second = session.user_turn("And of Germany?");
  EXPECT_EQ(qwen_style().decode(second).rfind("<end_of_turn>\n<start_of_turn>user\nAnd of Germany?", 0), 0u)
      << qwen_style().decode(second);
}

TEST(ChatSession, ATemplateThatRewritesEarlierTurnsIsRefused) {
  const ChatFormat format{
      std::make_shared<const ChatTemplate>(ChatTemplate::parse("{{ messages[-1]['content'] }}", "last-message-only")),
      ""};
  ChatSession session(format, qwen_style(), BosChoice::FromFile);
  session.user_turn("first");
  session.assistant_turn("reply");
  test::expect_error([&] { session.user_turn("second"); }, "last-message-only: the template renders the earlier turns");
}

TEST(ChatTaskPrompt, SplitsWhereTheQuestionStarts) {
  const ChatFormat format = builtin("chatml", "Answer briefly.");
  const std::string context = "The pass key is 7341. Grass is green.", question = "\nWhat is the pass key?";
  const ChatTaskPrompt prompt = render_task_prompt(format, qwen_style(), context, question);
  const std::string whole = format.chat_template->render({{"system", "Answer briefly."}, {"user", context + question}},
                                                         chat_render_options(qwen_style(), true));
  EXPECT_EQ(prompt.before_question + prompt.from_question, whole);
  EXPECT_EQ(prompt.before_question.substr(prompt.before_question.size() - context.size()), context);
  EXPECT_EQ(prompt.from_question.rfind(question, 0), 0u);
  EXPECT_EQ(prompt.from_question.substr(prompt.from_question.size() - 22), "<|im_start|>assistant\n");
  // --bos adds a BOS before a rendering that has none; the file's rule (none here) adds nothing.
  EXPECT_EQ(encode_rendered_chat(qwen_style(), prompt.before_question, BosChoice::FromFile),
            qwen_style().encode_with_specials(prompt.before_question));
}

}  // namespace
}  // namespace kvc
