#include "chat/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/python_text.h"
#include "util/utf8.h"

namespace kvc::jinja {
namespace {

// repr() and json of a namespace follow its attributes, which may lead back to it: cut off rather than
// recursing without end (Python raises RecursionError or "Circular reference detected").
void check_nesting(int depth) {
  if (depth > kMaxNesting) throw TemplateError(fmt::format("values nest more than {} levels deep", kMaxNesting));
}

void repr_into(std::string& out, const Value& value, int depth);

void str_into(std::string& out, const Value& value, int depth) {
  switch (value.type()) {
    case Value::Type::Undefined: return;
    case Value::Type::String: out += value.as_string(); return;
    default: repr_into(out, value, depth);
  }
}

void repr_into(std::string& out, const Value& value, int depth) {
  check_nesting(depth);
  switch (value.type()) {
    case Value::Type::Undefined: out += "Undefined"; return;
    case Value::Type::None: out += "None"; return;
    case Value::Type::Bool: out += value.as_bool() ? "True" : "False"; return;
    case Value::Type::Int: out += py::int_str(value.as_int()); return;
    case Value::Type::Float: out += py::float_repr(value.as_float()); return;
    case Value::Type::String: out += py::repr(value.as_string()); return;
    case Value::Type::List: {
      const List& items = value.as_list();
      out += value.is_tuple() ? '(' : '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, items[i], depth + 1);
      }
      if (value.is_tuple() && items.size() == 1) out += ',';
      out += value.is_tuple() ? ')' : ']';
      return;
    }
    case Value::Type::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, key, depth + 1);
        out += ": ";
        repr_into(out, item, depth + 1);
      }
      out += '}';
      return;
    }
    case Value::Type::Object: {
      const Object& object = value.as_object();
      if (object.class_name == "Namespace") {
        out += "<Namespace {";
        bool first = true;
        for (const auto& [name, item] : object.attributes) {
          if (!first) out += ", ";
          first = false;
          out += py::repr(name);
          out += ": ";
          repr_into(out, item, depth + 1);
        }
        out += "}>";
      } else {
        const Value* index = object.find("index");
        const Value* length = object.find("length");
        out +=
            fmt::format("<{} {}/{}>", object.class_name, index ? to_str(*index) : "?", length ? to_str(*length) : "?");
      }
      return;
    }
    case Value::Type::Function: out += fmt::format("<function {}>", value.as_function().name); return;
  }
}

int numeric_compare(const Value& a, const Value& b) {
  if (a.type() != Value::Type::Float && b.type() != Value::Type::Float) {
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  const double x = a.as_float(), y = b.as_float();
  return x < y ? -1 : (x > y ? 1 : 0);
}

void json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  char buffer[16];
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char byte = static_cast<unsigned char>(text[pos]);
    switch (byte) {
      case '"':
        out += "\\\"";
        ++pos;
        continue;
      case '\\':
        out += "\\\\";
        ++pos;
        continue;
      case '\n':
        out += "\\n";
        ++pos;
        continue;
      case '\r':
        out += "\\r";
        ++pos;
        continue;
      case '\t':
        out += "\\t";
        ++pos;
        continue;
      case '\b':
        out += "\\b";
        ++pos;
        continue;
      case '\f':
        out += "\\f";
        ++pos;
        continue;
      default: break;
    }
    if (byte < 0x20 || (ensure_ascii && byte == 0x7F)) {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", byte);
      out += buffer;
      ++pos;
      continue;
    }
    const size_t length = utf8_sequence_length(text, pos);
    if (byte < 0x80 || !ensure_ascii || length == 0) {
      const size_t n = length == 0 ? 1 : length;
      out.append(text, pos, n);
      pos += n;
      continue;
    }
    uint32_t c = utf8_decode(text, pos, length);
    pos += length;
    if (c >= 0x10000) {
      c -= 0x10000;
      std::snprintf(buffer, sizeof buffer, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
    } else {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
    }
    out += buffer;
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return py::float_repr(f);
}

// A dict key as json.dumps writes it: strings as they are, numbers, booleans and None spelled out.
std::string json_key(const Value& key) {
  switch (key.type()) {
    case Value::Type::String: return key.as_string();
    case Value::Type::Bool: return key.as_bool() ? "true" : "false";
    case Value::Type::None: return "null";
    case Value::Type::Int: return py::int_str(key.as_int());
    case Value::Type::Float: return json_float(key.as_float());
    default: throw TemplateError(fmt::format("keys must be str, int, float, bool or None, not {}", type_name(key)));
  }
}

void json_into(std::string& out, const Value& value, const JsonOptions& options, int depth) {
  check_nesting(depth);
  auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  };
  switch (value.type()) {
    case Value::Type::None: out += "null"; return;
    case Value::Type::Bool: out += value.as_bool() ? "true" : "false"; return;
    case Value::Type::Int: out += py::int_str(value.as_int()); return;
    case Value::Type::Float: out += json_float(value.as_float()); return;
    case Value::Type::String: json_string(out, value.as_string(), options.ensure_ascii); return;
    case Value::Type::List: {
      const List& items = value.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += options.item_separator;
        if (options.indent) newline(depth + 1);
        json_into(out, items[i], options, depth + 1);
      }
      if (options.indent) newline(depth);
      out += ']';
      return;
    }
    case Value::Type::Dict: {
      const auto& source = value.as_dict().entries;
      if (source.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      entries.reserve(source.size());
      for (const auto& [key, item] : source) entries.emplace_back(json_key(key), &item);
      if (options.sort_keys) {
        for (const auto& [key, item] : source) {
          if (!key.is_string()) throw TemplateError("tojson(sort_keys=true) needs string keys");
        }
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
      }
      out += '{';
      bool first = true;
      for (const auto& [key, item] : entries) {
        if (!first) out += options.item_separator;
        first = false;
        if (options.indent) newline(depth + 1);
        json_string(out, key, options.ensure_ascii);
        out += options.key_separator;
        json_into(out, *item, options, depth + 1);
      }
      if (options.indent) newline(depth);
      out += '}';
      return;
    }
    default: throw TemplateError(fmt::format("Object of type {} is not JSON serializable", type_name(value)));
  }
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.type_ = Type::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.type_ = Type::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::String;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}
namespace {
uint16_t container_depth(int deepest_item) {
  if (deepest_item + 1 > kMaxNesting)
    throw TemplateError(fmt::format("lists and dicts nest more than {} levels deep", kMaxNesting));
  return static_cast<uint16_t>(deepest_item + 1);
}
}  // namespace

Value Value::list(List items, bool tuple) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth());
  Value v;
  v.type_ = Type::List;
  v.tuple_ = tuple;
  v.depth_ = container_depth(deepest);
  v.ptr_ = make_shared_value<List>(std::move(items));
  return v;
}
Value Value::dict(Dict entries) {
  int deepest = 0;
  for (const auto& [key, item] : entries.entries) deepest = std::max({deepest, key.depth(), item.depth()});
  Value v;
  v.type_ = Type::Dict;
  v.depth_ = container_depth(deepest);
  v.ptr_ = make_shared_value<Dict>(std::move(entries));
  return v;
}
Value Value::object(std::shared_ptr<Object> object) {
  Value v;
  v.type_ = Type::Object;
  v.ptr_ = std::move(object);
  return v;
}
Value Value::function(std::string name, std::function<Value(Evaluator&, const CallArgs&)> call) {
  Value v;
  v.type_ = Type::Function;
  v.ptr_ = make_shared_value<Function>(Function{std::move(name), std::move(call)});
  return v;
}

void release_deferred(void* payload, void (*destroy)(void*)) {
  static thread_local bool releasing = false;
  static thread_local std::vector<std::pair<void*, void (*)(void*)>> queue;
  if (releasing) {
    queue.emplace_back(payload, destroy);
    return;
  }
  releasing = true;
  destroy(payload);
  while (!queue.empty()) {
    const auto [next, destroy_next] = queue.back();
    queue.pop_back();
    destroy_next(next);
  }
  releasing = false;
}

std::string Value::undefined_message() const {
  if (ptr_) return *static_cast<const std::string*>(ptr_.get());
  return "value is undefined";
}

const Value* Dict::find(const Value& key) const {
  for (const auto& entry : entries) {
    if (equal(entry.first, key)) return &entry.second;
  }
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& entry : entries) {
    if (entry.first.is_string() && entry.first.as_string() == key) return &entry.second;
  }
  return nullptr;
}

const Value* Object::find(const std::string& name) const {
  for (const auto& attribute : attributes) {
    if (attribute.first == name) return &attribute.second;
  }
  return nullptr;
}

void Object::set(const std::string& name, Value value) {
  for (auto& attribute : attributes) {
    if (attribute.first == name) {
      attribute.second = std::move(value);
      return;
    }
  }
  attributes.emplace_back(name, std::move(value));
}

std::string type_name(const Value& value) {
  switch (value.type()) {
    case Value::Type::Undefined: return "Undefined";
    case Value::Type::None: return "NoneType";
    case Value::Type::Bool: return "bool";
    case Value::Type::Int: return "int";
    case Value::Type::Float: return "float";
    case Value::Type::String: return "str";
    case Value::Type::List: return value.is_tuple() ? "tuple" : "list";
    case Value::Type::Dict: return "dict";
    case Value::Type::Object: return value.as_object().class_name;
    case Value::Type::Function: return "function";
  }
  return "object";
}

bool truthy(const Value& value) {
  switch (value.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return false;
    case Value::Type::Bool: return value.as_bool();
    case Value::Type::Int: return value.as_int() != 0;
    case Value::Type::Float: return value.as_float() != 0.0;
    case Value::Type::String: return !value.as_string().empty();
    case Value::Type::List: return !value.as_list().empty();
    case Value::Type::Dict: return !value.as_dict().entries.empty();
    default: return true;
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numeric_compare(a, b) == 0;
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return true;
    case Value::Type::String: return a.as_string() == b.as_string();
    case Value::Type::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Type::Dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, item] : x.entries) {
        const Value* other = y.find(key);
        if (!other || !equal(item, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numeric_compare(a, b) < 0;
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order is code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw TemplateError(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b)));
}

std::string to_str(const Value& value) {
  if (value.is_string()) return value.as_string();
  std::string out;
  str_into(out, value, 0);
  return out;
}

std::string to_repr(const Value& value) {
  std::string out;
  repr_into(out, value, 0);
  return out;
}

std::string to_json(const Value& value, const JsonOptions& options) {
  std::string out;
  json_into(out, value, options, 0);
  return out;
}

}  // namespace kvc::jinja
