// Attribute and item access, slicing, iteration, the methods of str/list/dict, string formatting and
// the globals, with the behaviour of jinja2's ImmutableSandboxedEnvironment over Python objects.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_evaluator.h"
#include "chat/python_text.h"

namespace kvc::jinja {
namespace {

// jinja2's object_type_repr: how an undefined attribute names the object it was looked up on.
std::string object_description(const Value& object) {
  if (object.is_none()) return "None";
  return type_name(object) + " object";
}

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_description(object), name));
}

Value missing_element(const Value& object, const Value& key) {
  return Value::undefined(fmt::format("{} has no element {}", object_description(object), to_repr(key)));
}

// Methods the sandbox refuses because they would change a list or dict in place.
bool is_mutating_method(const Value& object, const std::string& name) {
  static const char* const kList[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};
  static const char* const kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (object.is_list() && !object.is_tuple())
    return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  if (object.is_dict()) return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  return false;
}

// Python's index normalization for one position: negative counts from the end; nullopt when outside.
std::optional<size_t> normalize_index(int64_t index, size_t size) {
  const int64_t n = static_cast<int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<size_t>(index);
}

std::vector<int64_t> slice_positions(size_t size, const Value& start_value, const Value& stop_value,
                                     const Value& step_value) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (v.type() != Value::Type::Int && v.type() != Value::Type::Bool) {
      throw TemplateError(fmt::format("slice {} must be an integer or None, not {}", what, type_name(v)));
    }
    return v.as_int();
  };
  const int64_t length = static_cast<int64_t>(size);
  const int64_t step = as_index(step_value, "step").value_or(1);
  if (step == 0) throw TemplateError("slice step cannot be zero");
  const int64_t lower = step > 0 ? 0 : -1;
  const int64_t upper = step > 0 ? length : length - 1;
  auto bound = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t start = bound(as_index(start_value, "start"), step > 0 ? lower : upper);
  const int64_t stop = bound(as_index(stop_value, "stop"), step > 0 ? upper : lower);
  std::vector<int64_t> positions;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) positions.push_back(i);
  return positions;
}

// ---- str.format and % ----

// A format spec of the mini-language, the commonly used part: [[fill]align][sign][0][width][.precision][type].
std::string apply_spec(const Value& value, const std::string& spec) {
  if (spec.empty()) return to_str(value);
  size_t i = 0;
  char fill = ' ', align = 0, sign = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    fill = spec[0];
    align = spec[1];
    i = 2;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = '0';
      align = '=';
    }
    ++i;
  }
  size_t width = 0;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])))
    width = width * 10 + static_cast<size_t>(spec[i++] - '0');
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])))
      precision = precision * 10 + (spec[i++] - '0');
  }
  const char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size() || width > 10000) throw TemplateError(fmt::format("format spec '{}' is not supported", spec));
  std::string body;
  const bool numeric = value.is_number();
  if (type == 'd') {
    if (!value.is_number() || value.type() == Value::Type::Float)
      throw TemplateError(fmt::format("unknown format code 'd' for object of type '{}'", type_name(value)));
    body = py::int_str(value.as_int());
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'g' || type == '%') {
    if (!numeric)
      throw TemplateError(fmt::format("unknown format code '{}' for object of type '{}'", type, type_name(value)));
    double x = value.as_float();
    char c = type == '%' ? 'f' : type;
    if (type == '%') x *= 100;
    char buffer[512];
    std::snprintf(buffer, sizeof buffer, fmt::format("%.{}{}", precision < 0 ? 6 : precision, c).c_str(), x);
    body = buffer;
    if (type == '%') body += '%';
  } else if (type == 0 || type == 's') {
    if (type == 's' && !value.is_string())
      throw TemplateError(fmt::format("unknown format code 's' for object of type '{}'", type_name(value)));
    body = to_str(value);
    if (precision >= 0 && value.is_string()) {
      const py::CodePoints cp = py::code_points(body);
      if (cp.chars.size() > static_cast<size_t>(precision))
        body = body.substr(0, cp.offsets[static_cast<size_t>(precision)]);
    }
  } else {
    throw TemplateError(fmt::format("format spec '{}' is not supported", spec));
  }
  if (numeric && sign && body[0] != '-') body = (sign == '-' ? "" : std::string(1, sign)) + body;
  const size_t length = py::length(body);
  if (length >= width) return body;
  const size_t pad = width - length;
  if (!align) align = numeric ? '>' : '<';
  const std::string fill_text(1, fill);
  auto repeat = [&](size_t n) {
    std::string s;
    for (size_t k = 0; k < n; ++k) s += fill_text;
    return s;
  };
  switch (align) {
    case '<': return body + repeat(pad);
    case '>': return repeat(pad) + body;
    case '^': return repeat(pad / 2) + body + repeat(pad - pad / 2);
    default: {
      const bool has_sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ');
      return has_sign ? body.substr(0, 1) + repeat(pad) + body.substr(1) : repeat(pad) + body;
    }
  }
}

std::string str_format(const std::string& pattern, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '}') {
      if (i + 1 < pattern.size() && pattern[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw TemplateError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) throw TemplateError("Single '{' encountered in format string");
    std::string field = pattern.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conversion;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    size_t name_end = field.find_first_of(".[");
    const std::string head = field.substr(0, name_end);
    Value value;
    if (head.empty() ||
        std::all_of(head.begin(), head.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
      const size_t index = head.empty() ? auto_index++ : static_cast<size_t>(std::stoul(head));
      if (index >= args.positional.size())
        throw TemplateError(fmt::format("Replacement index {} out of range for positional args tuple", index));
      value = args.positional[index];
    } else {
      const Value* found = nullptr;
      for (const auto& [key, item] : args.keyword) {
        if (key == head) found = &item;
      }
      if (!found) throw TemplateError(fmt::format("format(): no argument named '{}'", head));
      value = *found;
    }
    while (name_end != std::string::npos && name_end < field.size()) {
      if (field[name_end] == '.') {
        const size_t next = field.find_first_of(".[", name_end + 1);
        value = get_attribute(value, field.substr(name_end + 1, next - name_end - 1));
        name_end = next;
      } else {
        const size_t end = field.find(']', name_end);
        if (end == std::string::npos) throw TemplateError("Missing ']' in format string");
        const std::string key = field.substr(name_end + 1, end - name_end - 1);
        const bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char d) {
          return std::isdigit(static_cast<unsigned char>(d));
        });
        value = get_item(value, digits ? Value::integer(std::stoll(key)) : Value::string(key));
        name_end = end + 1;
      }
    }
    if (conversion == "r") {
      value = Value::string(to_repr(value));
    } else if (conversion == "s") {
      value = Value::string(to_str(value));
    } else if (!conversion.empty()) {
      throw TemplateError(fmt::format("Unknown conversion specifier {}", conversion));
    }
    out += apply_spec(value, spec);
  }
  return out;
}

// ---- methods ----

using Method = Value (*)(Evaluator&, const Value& self, const CallArgs& args);

std::optional<std::string> chars_arg(const CallArgs& args, const char* name) {
  return BoundArgs(args, name, {"chars"}).string(0);
}

Value make_list_of_strings(const std::vector<std::string>& parts) {
  List items;
  items.reserve(parts.size());
  for (const auto& part : parts) items.push_back(Value::string(part));
  return Value::list(std::move(items));
}

std::optional<std::string> separator(const BoundArgs& bound) {
  std::optional<std::string> sep = bound.string(0);
  if (sep && sep->empty()) throw TemplateError("empty separator");
  return sep;
}

// startswith/endswith: a prefix or a tuple of them.
bool affix_match(const Value& self, const CallArgs& args, const char* name, bool prefix) {
  const BoundArgs bound(args, name, {"prefix", "start", "end"});
  const Value& wanted = bound.required(0);
  std::string window;
  std::string_view text = self.as_string();
  if (bound.has(1) || bound.has(2)) {
    const py::CodePoints cp = py::code_points(text);
    const std::vector<int64_t> positions =
        slice_positions(cp.chars.size(), bound.value(1, Value::none()), bound.value(2, Value::none()), Value::none());
    const size_t first = positions.empty() ? 0 : static_cast<size_t>(positions.front());
    const size_t last = positions.empty() ? 0 : static_cast<size_t>(positions.back()) + 1;
    window = positions.empty() ? "" : std::string(text.substr(cp.offsets[first], cp.offsets[last] - cp.offsets[first]));
    text = window;
  }
  auto one = [&](const Value& v) {
    if (!v.is_string())
      throw TemplateError(fmt::format("{} first arg must be str or a tuple of str, not {}", name, type_name(v)));
    const std::string& s = v.as_string();
    if (s.size() > text.size()) return false;
    return prefix ? text.compare(0, s.size(), s) == 0 : text.compare(text.size() - s.size(), s.size(), s) == 0;
  };
  if (wanted.is_list()) {
    for (const Value& v : wanted.as_list()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(wanted);
}

int64_t find_index(const Value& self, const CallArgs& args, const char* name, bool reverse) {
  const BoundArgs bound(args, name, {"sub", "start", "end"});
  const Value& sub = bound.required(0);
  if (!sub.is_string()) throw TemplateError(fmt::format("must be str, not {}", type_name(sub)));
  const std::string& text = self.as_string();
  const py::CodePoints cp = py::code_points(text);
  const std::vector<int64_t> window =
      slice_positions(cp.chars.size(), bound.value(1, Value::none()), bound.value(2, Value::none()), Value::none());
  const size_t begin = window.empty() ? 0 : cp.offsets[static_cast<size_t>(window.front())];
  const size_t end = window.empty() ? 0 : cp.offsets[static_cast<size_t>(window.back()) + 1];
  if (window.empty() && !sub.as_string().empty()) return -1;
  const std::string_view view(text.data() + begin, end - begin);
  const size_t found = reverse ? view.rfind(sub.as_string()) : view.find(sub.as_string());
  if (found == std::string_view::npos) return -1;
  const size_t byte = begin + found;
  return static_cast<int64_t>(std::lower_bound(cp.offsets.begin(), cp.offsets.end(), byte) - cp.offsets.begin());
}

Value str_pad(Evaluator& ev, const Value& self, const CallArgs& args, const char* name, char align) {
  const BoundArgs bound(args, name, {"width", "fillchar"});
  const int64_t width = bound.integer(0, 0);
  const std::string fill = bound.string(1, " ");
  if (py::length(fill) != 1) throw TemplateError("The fill character must be exactly one character long");
  const std::string& text = self.as_string();
  const int64_t length = static_cast<int64_t>(py::length(text));
  if (width <= length) return self;
  ev.check_size(static_cast<uint64_t>(width) * fill.size() + text.size());
  const size_t pad = static_cast<size_t>(width - length);
  size_t left = align == '<' ? 0 : align == '>' ? pad : pad / 2 + (pad & static_cast<size_t>(width) & 1);
  std::string out;
  for (size_t k = 0; k < left; ++k) out += fill;
  out += text;
  for (size_t k = left; k < pad; ++k) out += fill;
  return ev.make_string(std::move(out));
}

Value string_method(Evaluator& ev, const std::string& name, const Value& self, const CallArgs& args) {
  const std::string& text = self.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return ev.make_string(py::strip(text, chars_arg(args, name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const BoundArgs bound(args, name, {"sep", "maxsplit"});
    const auto sep = separator(bound);
    const int64_t maxsplit = bound.integer(1, -1);
    return make_list_of_strings(name == "split" ? py::split(text, sep, maxsplit) : py::rsplit(text, sep, maxsplit));
  }
  if (name == "splitlines")
    return make_list_of_strings(py::splitlines(text, BoundArgs(args, name, {"keepends"}).flag(0, false)));
  if (name == "startswith" || name == "endswith")
    return Value::boolean(affix_match(self, args, name.c_str(), name == "startswith"));
  if (name == "replace") {
    const BoundArgs bound(args, name, {"old", "new", "count"});
    const Value& old_value = bound.required(0);
    const Value& new_value = bound.required(1);
    if (!old_value.is_string() || !new_value.is_string()) throw TemplateError("replace() arguments must be str");
    const int64_t count = bound.integer(2, -1);
    const int64_t hits = old_value.as_string().empty() ? static_cast<int64_t>(py::length(text)) + 1
                                                       : py::count(text, old_value.as_string());
    const int64_t done = count < 0 ? hits : std::min(count, hits);
    ev.check_size(text.size() + static_cast<uint64_t>(done) * new_value.as_string().size());
    return ev.make_string(py::replace(text, old_value.as_string(), new_value.as_string(), count));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "casefold" ||
      name == "swapcase") {
    BoundArgs(args, name, {});
    if (name == "upper") return ev.make_string(py::upper(text));
    if (name == "title") return ev.make_string(py::title(text));
    if (name == "capitalize") return ev.make_string(py::capitalize(text));
    if (name == "swapcase") {
      std::string out;
      const py::CodePoints cp = py::code_points(text);
      for (size_t i = 0; i < cp.chars.size(); ++i) {
        const std::string c = text.substr(cp.offsets[i], cp.offsets[i + 1] - cp.offsets[i]);
        const std::string up = py::upper(c);
        out += up != c ? up : py::lower(c);
      }
      return ev.make_string(std::move(out));
    }
    return ev.make_string(py::lower(text));
  }
  if (name == "find" || name == "rfind") return Value::integer(find_index(self, args, name.c_str(), name == "rfind"));
  if (name == "index" || name == "rindex") {
    const int64_t found = find_index(self, args, name.c_str(), name == "rindex");
    if (found < 0) throw TemplateError("substring not found");
    return Value::integer(found);
  }
  if (name == "count") {
    const BoundArgs bound(args, name, {"sub"});
    const Value& sub = bound.required(0);
    if (!sub.is_string()) throw TemplateError(fmt::format("must be str, not {}", type_name(sub)));
    return Value::integer(py::count(text, sub.as_string()));
  }
  if (name == "join") {
    const BoundArgs bound(args, name, {"iterable"});
    const List items = iterate(bound.required(0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        throw TemplateError(fmt::format("sequence item {}: expected str instance, {} found", i, type_name(items[i])));
      if (i) out += text;
      out += items[i].as_string();
      ev.check_size(out.size());
    }
    return ev.make_string(std::move(out));
  }
  if (name == "format") return ev.make_string(str_format(text, args));
  if (name == "removeprefix" || name == "removesuffix") {
    const auto affix = BoundArgs(args, name, {"affix"}).string(0).value_or("");
    if (name == "removeprefix")
      return text.compare(0, affix.size(), affix) == 0 ? Value::string(text.substr(affix.size())) : self;
    if (affix.size() <= text.size() && text.compare(text.size() - affix.size(), affix.size(), affix) == 0)
      return Value::string(text.substr(0, text.size() - affix.size()));
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    const auto sep = separator(BoundArgs(args, name, {"sep"}));
    if (!sep) throw TemplateError(fmt::format("{}() argument must be str, not None", name));
    const size_t found = name == "partition" ? text.find(*sep) : text.rfind(*sep);
    if (found == std::string::npos) {
      if (name == "partition") return Value::list({self, Value::string(""), Value::string("")}, true);
      return Value::list({Value::string(""), Value::string(""), self}, true);
    }
    return Value::list(
        {Value::string(text.substr(0, found)), Value::string(*sep), Value::string(text.substr(found + sep->size()))},
        true);
  }
  if (name == "zfill") {
    const int64_t width = BoundArgs(args, name, {"width"}).integer(0, 0);
    const int64_t length = static_cast<int64_t>(py::length(text));
    if (width <= length) return self;
    ev.check_size(static_cast<uint64_t>(width));
    const size_t pad = static_cast<size_t>(width - length);
    if (!text.empty() && (text[0] == '-' || text[0] == '+'))
      return ev.make_string(text.substr(0, 1) + std::string(pad, '0') + text.substr(1));
    return ev.make_string(std::string(pad, '0') + text);
  }
  if (name == "ljust") return str_pad(ev, self, args, "ljust", '<');
  if (name == "rjust") return str_pad(ev, self, args, "rjust", '>');
  if (name == "center") return str_pad(ev, self, args, "center", '^');
  static const std::pair<const char*, py::CharTest> kTests[] = {
      {"isalpha", py::CharTest::Alpha},     {"isdigit", py::CharTest::Digit}, {"isdecimal", py::CharTest::Decimal},
      {"isnumeric", py::CharTest::Numeric}, {"isalnum", py::CharTest::Alnum}, {"isspace", py::CharTest::Space},
      {"isupper", py::CharTest::Upper},     {"islower", py::CharTest::Lower}};
  for (const auto& [test_name, test] : kTests) {
    if (name == test_name) {
      BoundArgs(args, name, {});
      return Value::boolean(py::str_is(text, test));
    }
  }
  throw TemplateError(fmt::format("'str' object has no attribute '{}'", name));
}

bool is_string_method(const std::string& name) {
  static const char* const kNames[] = {
      "strip",     "lstrip",     "rstrip",  "split",   "rsplit",     "splitlines", "startswith",   "endswith",
      "replace",   "upper",      "lower",   "title",   "capitalize", "casefold",   "swapcase",     "find",
      "rfind",     "index",      "rindex",  "count",   "join",       "format",     "removeprefix", "removesuffix",
      "partition", "rpartition", "zfill",   "ljust",   "rjust",      "center",     "isalpha",      "isdigit",
      "isdecimal", "isnumeric",  "isalnum", "isspace", "isupper",    "islower"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Value list_method(Evaluator&, const std::string& name, const Value& self, const CallArgs& args) {
  const List& items = self.as_list();
  const Value& wanted = BoundArgs(args, name, {"value"}).required(0);
  if (name == "count") {
    return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value& v) { return equal(v, wanted); }));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (equal(items[i], wanted)) return Value::integer(static_cast<int64_t>(i));
  }
  throw TemplateError(fmt::format("{} is not in list", to_repr(wanted)));
}

Value dict_method(Evaluator&, const std::string& name, const Value& self, const CallArgs& args) {
  const Dict& dict = self.as_dict();
  if (name == "get") {
    const BoundArgs bound(args, name, {"key", "default"});
    const Value* found = dict.find(bound.required(0));
    return found ? *found : bound.value(1, Value::none());
  }
  BoundArgs(args, name, {});
  List out;
  out.reserve(dict.entries.size());
  for (const auto& [key, item] : dict.entries) {
    if (name == "items") {
      out.push_back(Value::list({key, item}, true));
    } else {
      out.push_back(name == "keys" ? key : item);
    }
  }
  return Value::list(std::move(out));
}

Value bind(const Value& self, const std::string& name,
           Value (*method)(Evaluator&, const std::string&, const Value&, const CallArgs&)) {
  return Value::function(
      name, [self, name, method](Evaluator& ev, const CallArgs& args) { return method(ev, name, self, args); });
}

Value refused_method(const Value& self, const std::string& name) {
  const std::string message = fmt::format("access to attribute '{}' of '{}' object is unsafe", name, type_name(self));
  return Value::function(name, [message](Evaluator&, const CallArgs&) -> Value { throw TemplateError(message); });
}

// ---- globals ----

Value global_range(Evaluator& ev, const CallArgs& args) {
  if (!args.keyword.empty()) throw TemplateError("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) throw TemplateError("range expected 1 to 3 arguments");
  std::vector<int64_t> bounds;
  for (const Value& v : args.positional) {
    if (v.type() != Value::Type::Int && v.type() != Value::Type::Bool) {
      throw TemplateError(fmt::format("'{}' object cannot be interpreted as an integer", type_name(v)));
    }
    bounds.push_back(v.as_int());
  }
  const int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  const int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  const int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  // The sandbox's MAX_RANGE.
  const double count =
      std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
  if (count > 100000) throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  ev.charge_steps(static_cast<uint64_t>(count) / 16);
  List items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  return Value::list(std::move(items));
}

void add_mapping(std::vector<std::pair<std::string, Value>>& out, const Value& source, const char* function) {
  auto put = [&](const Value& key, const Value& value) {
    if (!key.is_string()) throw TemplateError(fmt::format("{}(): keys must be strings", function));
    for (auto& entry : out) {
      if (entry.first == key.as_string()) {
        entry.second = value;
        return;
      }
    }
    out.emplace_back(key.as_string(), value);
  };
  if (source.is_dict()) {
    for (const auto& [key, value] : source.as_dict().entries) put(key, value);
    return;
  }
  for (const Value& pair : iterate(source)) {
    const List items = iterate(pair);
    if (items.size() != 2) throw TemplateError(fmt::format("{}(): sequence elements must be pairs", function));
    put(items[0], items[1]);
  }
}

std::vector<std::pair<std::string, Value>> mapping_arguments(const CallArgs& args, const char* function) {
  if (args.positional.size() > 1)
    throw TemplateError(fmt::format("{}() expected at most 1 positional argument", function));
  std::vector<std::pair<std::string, Value>> out;
  if (!args.positional.empty()) add_mapping(out, args.positional[0], function);
  for (const auto& [key, value] : args.keyword)
    add_mapping(out, Value::dict(Dict{{{Value::string(key), value}}}), function);
  return out;
}

Value global_namespace(Evaluator& ev, const CallArgs& args) {
  auto object = make_shared_value<Object>();
  ev.track(object);
  object->class_name = "Namespace";
  object->assignable = true;
  for (auto& [name, value] : mapping_arguments(args, "namespace")) {
    if (!name.empty() && name[0] == '_') {
      throw TemplateError(
          fmt::format("Chat templates cannot store underscore-prefixed attributes on a namespace, but got {}. "
                      "Please rename the attribute.",
                      py::repr(name)));
    }
    object->set(name, std::move(value));
  }
  return Value::object(std::move(object));
}

Value global_dict(Evaluator&, const CallArgs& args) {
  Dict dict;
  for (auto& [name, value] : mapping_arguments(args, "dict"))
    dict.entries.emplace_back(Value::string(name), std::move(value));
  return Value::dict(std::move(dict));
}

Value global_raise_exception(Evaluator&, const CallArgs& args) {
  const Value& message = BoundArgs(args, "raise_exception", {"message"}).required(0);
  throw TemplateError(to_str(message), 0, true);
}

Value global_strftime_now(Evaluator& ev, const CallArgs& args) {
  const std::string format = BoundArgs(args, "strftime_now", {"format"}).string(0).value_or("");
  if (format.size() > 1000) throw TemplateError("strftime_now(): the format is too long");
  if (format.empty()) return Value::string("");
  std::vector<char> buffer(256 + format.size() * 64);
  const size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &ev.now());
  return Value::string(std::string(buffer.data(), n));
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  switch (object.type()) {
    case Value::Type::Undefined: throw TemplateError(object.undefined_message());
    case Value::Type::String:
      if (is_string_method(name)) return bind(object, name, string_method);
      break;
    case Value::Type::List:
      if (name == "index" || name == "count") return bind(object, name, list_method);
      if (is_mutating_method(object, name)) return refused_method(object, name);
      break;
    case Value::Type::Dict:
      if (name == "get" || name == "items" || name == "keys" || name == "values")
        return bind(object, name, dict_method);
      if (is_mutating_method(object, name)) return refused_method(object, name);
      if (const Value* found = object.as_dict().find(name)) return *found;
      break;
    case Value::Type::Object:
      if (const Value* found = object.as_object().find(name)) return *found;
      break;
    default: break;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  switch (object.type()) {
    case Value::Type::Undefined: throw TemplateError(object.undefined_message());
    case Value::Type::String:
      if (key.type() == Value::Type::Int || key.type() == Value::Type::Bool) {
        const py::CodePoints cp = py::code_points(object.as_string());
        if (const auto i = normalize_index(key.as_int(), cp.chars.size())) {
          return Value::string(object.as_string().substr(cp.offsets[*i], cp.offsets[*i + 1] - cp.offsets[*i]));
        }
        return missing_element(object, key);
      }
      break;
    case Value::Type::List:
      if (key.type() == Value::Type::Int || key.type() == Value::Type::Bool) {
        if (const auto i = normalize_index(key.as_int(), object.as_list().size())) return object.as_list()[*i];
        return missing_element(object, key);
      }
      break;
    case Value::Type::Dict:
      if (const Value* found = object.as_dict().find(key)) return *found;
      if (key.is_string()) {
        const std::string& name = key.as_string();
        if (name == "get" || name == "items" || name == "keys" || name == "values")
          return bind(object, name, dict_method);
        return missing_attribute(object, name);
      }
      return missing_element(object, key);
    default: break;
  }
  if (key.is_string()) return get_attribute(object, key.as_string());
  return missing_element(object, key);
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) throw TemplateError(object.undefined_message());
  if (object.is_string()) {
    const std::string& text = object.as_string();
    const py::CodePoints cp = py::code_points(text);
    std::string out;
    for (int64_t i : slice_positions(cp.chars.size(), start, stop, step)) {
      const size_t k = static_cast<size_t>(i);
      out.append(text, cp.offsets[k], cp.offsets[k + 1] - cp.offsets[k]);
    }
    return Value::string(std::move(out));
  }
  if (object.is_list()) {
    const List& items = object.as_list();
    List out;
    for (int64_t i : slice_positions(items.size(), start, stop, step)) out.push_back(items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), object.is_tuple());
  }
  // jinja2 compiles a slice to Python's own subscript, not its forgiving getitem: anything else fails.
  if (object.is_dict()) throw TemplateError("unhashable type: 'slice'");
  throw TemplateError(fmt::format("'{}' object is not subscriptable", type_name(object)));
}

List iterate(const Value& value) {
  switch (value.type()) {
    case Value::Type::Undefined: return {};
    case Value::Type::List: return value.as_list();
    case Value::Type::Dict: {
      List keys;
      keys.reserve(value.as_dict().entries.size());
      for (const auto& entry : value.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Type::String: {
      const std::string& text = value.as_string();
      const py::CodePoints cp = py::code_points(text);
      List chars;
      chars.reserve(cp.chars.size());
      for (size_t i = 0; i < cp.chars.size(); ++i)
        chars.push_back(Value::string(text.substr(cp.offsets[i], cp.offsets[i + 1] - cp.offsets[i])));
      return chars;
    }
    default: throw TemplateError(fmt::format("'{}' object is not iterable", type_name(value)));
  }
}

std::string percent_format(const std::string& pattern, const Value& args) {
  const List values = args.is_tuple() ? args.as_list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    size_t j = i + 1;
    std::string flags;
    while (j < pattern.size() && std::string_view("-+ 0#").find(pattern[j]) != std::string_view::npos)
      flags += pattern[j++];
    std::string width, precision;
    while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j]))) width += pattern[j++];
    if (j < pattern.size() && pattern[j] == '.') {
      ++j;
      while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j]))) precision += pattern[j++];
      if (precision.empty()) precision = "0";
    }
    if (j >= pattern.size()) throw TemplateError("incomplete format");
    const char conversion = pattern[j];
    i = j;
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw TemplateError("not enough arguments for format string");
    const Value& v = values[next++];
    if (width.size() > 4 || precision.size() > 4) throw TemplateError("format width too large");
    std::string spec = "%" + flags + width + (precision.empty() ? "" : "." + precision);
    char buffer[10240];
    switch (conversion) {
      case 's':
      case 'r': {
        std::string text = conversion == 's' ? to_str(v) : to_repr(v);
        if (!precision.empty())
          text = text.substr(
              0, py::code_points(text).offsets[std::min(py::length(text), static_cast<size_t>(std::stoul(precision)))]);
        const size_t w = width.empty() ? 0 : std::stoul(width);
        const size_t length = py::length(text);
        if (length < w)
          text = flags.find('-') != std::string::npos ? text + std::string(w - length, ' ')
                                                      : std::string(w - length, ' ') + text;
        out += text;
        break;
      }
      case 'd':
      case 'i':
        if (!v.is_number())
          throw TemplateError(fmt::format("%{} format: a real number is required, not {}", conversion, type_name(v)));
        std::snprintf(buffer, sizeof buffer, (spec + "lld").c_str(),
                      static_cast<long long>(v.type() == Value::Type::Float ? std::trunc(v.as_float()) : v.as_int()));
        out += buffer;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v.is_number()) throw TemplateError(fmt::format("must be real number, not {}", type_name(v)));
        std::snprintf(buffer, sizeof buffer, (spec + conversion).c_str(), v.as_float());
        out += buffer;
        break;
      default: throw TemplateError(fmt::format("unsupported format character '{}'", conversion));
    }
  }
  // Python's rule: a tuple's items must all be used; a single value too, unless it is a mapping (a dict,
  // or anything with __getitem__, a list or jinja2's Undefined, which Python's check also counts as one).
  const bool mapping = args.is_dict() || args.is_undefined() || (args.is_list() && !args.is_tuple());
  if (next < values.size() && !mapping) throw TemplateError("not all arguments converted during string formatting");
  return out;
}

std::vector<std::pair<std::string, Value>> global_functions() {
  return {
      {"range", Value::function("range", global_range)},
      {"namespace", Value::function("namespace", global_namespace)},
      {"dict", Value::function("dict", global_dict)},
      {"raise_exception", Value::function("raise_exception", global_raise_exception)},
      {"strftime_now", Value::function("strftime_now", global_strftime_now)},
  };
}

}  // namespace kvc::jinja
