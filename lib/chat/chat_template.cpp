#include "chat/chat_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_evaluator.h"
#include "chat/jinja_parser.h"
#include "io/gguf_reader.h"
#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace kvc {
namespace {

namespace fs = std::filesystem;

// A template's own message can be anything: the error stays one line of reasonable length.
std::string one_line(const std::string& message) {
  constexpr size_t kMaxBytes = 400;
  std::string out;
  for (char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  if (out.size() > kMaxBytes) {
    out.resize(kMaxBytes - utf8_incomplete_tail(std::string_view(out).substr(0, kMaxBytes)));
    out += "...";
  }
  return out;
}

[[noreturn]] void fail_template(const std::string& origin, const jinja::TemplateError& e) {
  const std::string where = e.line() > 0 ? fmt::format("{}: line {}", origin, e.line()) : origin;
  if (e.raised()) fail("{}: the template refused the conversation: {}", where, one_line(e.what()));
  fail("{}: {}", where, one_line(e.what()));
}

jinja::Value message_list(const std::vector<ChatMessage>& messages) {
  jinja::List list;
  list.reserve(messages.size());
  for (const ChatMessage& message : messages) {
    jinja::Dict dict;
    dict.entries.emplace_back(jinja::Value::string("role"), jinja::Value::string(message.role));
    dict.entries.emplace_back(jinja::Value::string("content"), jinja::Value::string(message.content));
    list.push_back(jinja::Value::dict(std::move(dict)));
  }
  return jinja::Value::list(std::move(list));
}

struct FoundTemplate {
  std::string source;
  std::string origin;
};

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) == "GGUF";
}

std::optional<FoundTemplate> from_tokenizer_config(const std::string& path) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail("'{}': not valid JSON ({})", path, e.what());
  }
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null())
    return std::nullopt;
  const nlohmann::json& field = config["chat_template"];
  const std::string origin = fmt::format("'{}': chat_template", path);
  if (field.is_string()) return FoundTemplate{field.get<std::string>(), origin};
  if (!field.is_array())
    fail("'{}': chat_template is {}, expected a string or a list of {{name, template}}", path, field.type_name());
  std::vector<std::string> names;
  for (const nlohmann::json& entry : field) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
        !entry["template"].is_string()) {
      fail("'{}': chat_template lists an entry that is not {{\"name\": ..., \"template\": ...}}", path);
    }
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") return FoundTemplate{entry["template"].get<std::string>(), origin + " 'default'"};
    names.push_back(name);
  }
  fail("'{}': chat_template lists templates ({}) but none named 'default'", path, fmt::join(names, ", "));
}

std::optional<FoundTemplate> find_model_template(const std::string& model_path) {
  KVC_CHECK(!model_path.empty(), "no model path to read a chat template from");
  std::error_code error;
  const fs::file_status status = fs::status(model_path, error);
  KVC_CHECK(!error && fs::exists(status), "'{}': no such file or folder", model_path);
  std::string folder = model_path;
  if (fs::is_regular_file(status)) {
    if (is_gguf(model_path)) {
      const auto file = gguf::GgufFile::open_metadata(model_path);
      if (!file->has("tokenizer.chat_template")) return std::nullopt;
      return FoundTemplate{file->get_string("tokenizer.chat_template"),
                           fmt::format("'{}': tokenizer.chat_template", model_path)};
    }
    folder = fs::path(model_path).parent_path().string();
    if (folder.empty()) folder = ".";
  }
  const std::string jinja_file = (fs::path(folder) / "chat_template.jinja").string();
  if (fs::is_regular_file(jinja_file, error))
    return FoundTemplate{read_text_file(jinja_file), fmt::format("'{}'", jinja_file)};
  const std::string config = (fs::path(folder) / "tokenizer_config.json").string();
  if (fs::is_regular_file(config, error)) return from_tokenizer_config(config);
  return std::nullopt;
}

std::string template_choices() { return fmt::format("{}", fmt::join(builtin_chat_template_names(), "|")); }

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string origin, std::shared_ptr<const jinja::Program> program)
    : source_(std::move(source)), origin_(std::move(origin)), program_(std::move(program)) {}

ChatTemplate ChatTemplate::parse(const std::string& source, const std::string& origin) {
  try {
    auto program = std::make_shared<jinja::Program>(jinja::parse_template(source));
    return ChatTemplate(source, origin, std::move(program));
  } catch (const jinja::TemplateError& e) {
    fail_template(origin, e);
  }
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return render(messages, options, local);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                                 const std::tm& now) const {
  // What transformers' render_jinja_template passes: the messages, tools and documents (None here),
  // add_generation_prompt and the tokenizer's special tokens.
  const std::vector<std::pair<std::string, jinja::Value>> variables = {
      {"messages", message_list(messages)},
      {"tools", jinja::Value::none()},
      {"documents", jinja::Value::none()},
      {"add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt)},
      {"bos_token", jinja::Value::string(options.bos_token)},
      {"eos_token", jinja::Value::string(options.eos_token)},
  };
  try {
    jinja::Evaluator evaluator(jinja::Limits{}, now);
    return evaluator.render(*program_, variables);
  } catch (const jinja::TemplateError& e) {
    fail_template(origin_, e);
  } catch (const std::bad_alloc&) {
    fail("{}: out of memory while rendering the conversation", origin_);
  }
}

std::optional<std::string> model_chat_template(const std::string& model_path) {
  std::optional<FoundTemplate> found = find_model_template(model_path);
  if (!found) return std::nullopt;
  return std::move(found->source);
}

ChatTemplate resolve_chat_template(const std::string& flag_value, const std::string& model_path) {
  if (!flag_value.empty()) {
    if (std::optional<std::string> builtin = builtin_chat_template(flag_value)) {
      return ChatTemplate::parse(*builtin, "--chat-template " + flag_value);
    }
    std::error_code error;
    if (fs::is_regular_file(flag_value, error)) {
      std::ifstream in(flag_value, std::ios::binary);
      std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      KVC_CHECK(!in.bad(), "--chat-template '{}': cannot read the file", flag_value);
      return ChatTemplate::parse(source, fmt::format("--chat-template '{}'", flag_value));
    }
    fail("--chat-template '{}': neither a built-in template ({}) nor a readable file", flag_value, template_choices());
  }
  if (model_path.empty()) fail("no chat template: pass --chat-template {} or a template file", template_choices());
  std::optional<FoundTemplate> found = find_model_template(model_path);
  if (!found)
    fail("'{}' has no chat template; pass --chat-template {} or a template file", model_path, template_choices());
  return ChatTemplate::parse(found->source, found->origin);
}

}  // namespace kvc
