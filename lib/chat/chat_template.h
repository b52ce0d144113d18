#pragma once
// Chat templates: a model's Jinja template (or one shipped with kvc) turned into the prompt text for a
// conversation, byte for byte as Hugging Face transformers' apply_chat_template renders it (jinja2 with
// trim_blocks and lstrip_blocks, transformers' tojson, raise_exception and strftime_now). The text
// holds the special tokens the template writes (bos_token included where it writes it): encode it
// without adding special tokens again. docs/chat-templates.md lists what the interpreter supports.
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvc {

namespace jinja {
struct Program;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

// What a template sees besides messages: transformers passes bos_token/eos_token (the token strings)
// and add_generation_prompt.
struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
};

class ChatTemplate {
 public:
  // Parses Jinja source; `origin` names where it came from ("'model.gguf': tokenizer.chat_template",
  // "--chat-template chatml", a file path) and prefixes every error. Throws a one-line kvc::Error
  // naming the origin and the line for a syntax error, an unknown filter or test, or an unclosed block.
  static ChatTemplate parse(const std::string& source, const std::string& origin);

  // The template's rendering of `messages`, which it sees as a list of {"role", "content"} dicts, with
  // tools and documents None. Throws a one-line kvc::Error naming the origin and the line when the
  // template refuses the conversation (raise_exception: its own message), fails (an undefined value
  // used, a type error) or exceeds the interpreter's limits on work and size.
  std::string render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const;
  // The same with strftime_now() reading `now` instead of the local clock (templates that print
  // today's date, such as Llama 3.1's, then render reproducibly).
  std::string render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                     const std::tm& now) const;

  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, std::string origin, std::shared_ptr<const jinja::Program> program);

  std::string source_;
  std::string origin_;
  std::shared_ptr<const jinja::Program> program_;
};

// Templates shipped with kvc, by name: "chatml", "gemma", "llama2", "llama3", "mistral" and "plain"
// (role-prefixed lines, for a model without a template). Their sources are data/chat_templates/*.jinja,
// compiled into the library.
std::vector<std::string> builtin_chat_template_names();
std::optional<std::string> builtin_chat_template(const std::string& name);

// The model's own template: a GGUF file's tokenizer.chat_template, or, for a model folder or a file in
// one (tokenizer.json, config.json), chat_template.jinja beside it (which newer transformers save and
// prefer), else tokenizer_config.json's "chat_template" (a string, or a list of {name, template}
// objects: the "default" one). nullopt when the model has none; throws a one-line kvc::Error for a
// path that does not exist or a file that cannot be read.
std::optional<std::string> model_chat_template(const std::string& model_path);

// --chat-template NAME|FILE, else the model's template. Throws a one-line kvc::Error naming
// --chat-template when the name is neither a built-in nor a readable file, or when there is neither a
// flag nor a model template ("... has no chat template; pass --chat-template chatml|llama3|...").
ChatTemplate resolve_chat_template(const std::string& flag_value, const std::string& model_path);

}  // namespace kvc
