#pragma once
// Binds the arguments of a builtin call to its Python signature: positional first, then by keyword,
// with Python's errors for too many, unknown or repeated arguments.
#include <fmt/format.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace kvc::jinja {

class BoundArgs {
 public:
  BoundArgs(const CallArgs& args, const std::string& function, std::initializer_list<const char*> names)
      : function_(function), names_(names), slots_(names.size(), nullptr) {
    if (args.positional.size() > names_.size()) {
      throw TemplateError(fmt::format("{}() takes at most {} argument{} ({} given)", function, names_.size(),
                                      names_.size() == 1 ? "" : "s", args.positional.size()));
    }
    for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = &args.positional[i];
    for (const auto& [key, value] : args.keyword) {
      size_t i = 0;
      while (i < names_.size() && key != names_[i]) ++i;
      if (i == names_.size())
        throw TemplateError(fmt::format("{}() got an unexpected keyword argument '{}'", function, key));
      if (slots_[i]) throw TemplateError(fmt::format("{}() got multiple values for argument '{}'", function, key));
      slots_[i] = &value;
    }
  }

  const Value* get(size_t i) const { return slots_[i]; }
  bool has(size_t i) const { return slots_[i] != nullptr; }
  Value value(size_t i, Value fallback) const { return slots_[i] ? *slots_[i] : std::move(fallback); }
  const Value& required(size_t i) const {
    if (!slots_[i]) throw TemplateError(fmt::format("{}() missing required argument '{}'", function_, names_[i]));
    return *slots_[i];
  }
  bool flag(size_t i, bool fallback) const { return slots_[i] ? truthy(*slots_[i]) : fallback; }
  int64_t integer(size_t i, int64_t fallback) const {
    if (!slots_[i] || slots_[i]->is_none()) return fallback;
    if (slots_[i]->type() != Value::Type::Int && slots_[i]->type() != Value::Type::Bool) {
      throw TemplateError(
          fmt::format("{}(): '{}' must be an integer, not {}", function_, names_[i], type_name(*slots_[i])));
    }
    return slots_[i]->as_int();
  }
  // A string argument; absent or None gives nullopt.
  std::optional<std::string> string(size_t i) const {
    if (!slots_[i] || slots_[i]->is_none()) return std::nullopt;
    if (!slots_[i]->is_string()) {
      throw TemplateError(
          fmt::format("{}(): '{}' must be a string, not {}", function_, names_[i], type_name(*slots_[i])));
    }
    return slots_[i]->as_string();
  }
  std::string string(size_t i, const char* fallback) const {
    std::optional<std::string> s = string(i);
    return s ? *s : std::string(fallback);
  }

 private:
  std::string function_;
  std::vector<const char*> names_;
  std::vector<const Value*> slots_;
};

}  // namespace kvc::jinja
