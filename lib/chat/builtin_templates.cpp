// The templates under data/chat_templates/*.jinja, compiled in by cmake/embed_chat_templates.cmake.
#include <cstddef>

#include "chat/chat_template.h"

namespace kvc {
namespace {

struct BuiltinTemplate {
  const char* name;
  const unsigned char* bytes;
  size_t size;
};

#include "builtin_chat_templates.inc"

}  // namespace

std::vector<std::string> builtin_chat_template_names() {
  std::vector<std::string> names;
  for (const BuiltinTemplate& entry : kBuiltinTemplates) names.emplace_back(entry.name);
  return names;
}

std::optional<std::string> builtin_chat_template(const std::string& name) {
  for (const BuiltinTemplate& entry : kBuiltinTemplates) {
    if (name == entry.name) return std::string(reinterpret_cast<const char*>(entry.bytes), entry.size);
  }
  return std::nullopt;
}

}  // namespace kvc
