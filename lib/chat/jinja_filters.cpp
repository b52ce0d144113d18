// jinja2's builtin filters and tests (jinja2/filters.py, jinja2/tests.py) that chat templates use, with
// transformers' own tojson, which keeps non-ASCII text as it is.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_evaluator.h"
#include "chat/python_text.h"

namespace kvc::jinja {
namespace {

// ---- helpers ----

CallArgs rest_of(const CallArgs& args, size_t skip) {
  CallArgs rest;
  if (args.positional.size() > skip)
    rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(skip), args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

// jinja2's make_attrgetter: "a.b.0" looks up each part as an item (then attribute), digits as indices.
Value lookup_path(const Value& item, const std::string& path, const Value* fallback) {
  Value value = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    value = get_item(value, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (value.is_undefined() && fallback) return *fallback;
    if (dot == std::string::npos) return value;
    start = dot + 1;
  }
}

// The key a sort, unique, min or max compares: the attribute when one is named, lowercased strings
// unless case_sensitive.
Value sort_key(const Value& item, const std::optional<std::string>& attribute, bool case_sensitive) {
  Value key = attribute ? lookup_path(item, *attribute, nullptr) : item;
  if (!case_sensitive && key.is_string()) return Value::string(py::lower(key.as_string()));
  return key;
}

std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string digits;
  const std::string stripped = py::strip(text, std::nullopt, true, true);
  size_t i = 0;
  std::string sign;
  if (i < stripped.size() && (stripped[i] == '+' || stripped[i] == '-')) sign = stripped[i++];
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (i + 1 < stripped.size() && stripped[i] == '0') {
      const char p = static_cast<char>(stripped[i + 1] | 0x20);
      const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (prefixed && (base == 0 || base == prefixed)) {
        base = prefixed;
        i += 2;
        if (i < stripped.size() && stripped[i] == '_') ++i;
      }
    }
    if (base == 0) base = 10;
  }
  if (base < 2 || base > 36) return std::nullopt;
  for (; i < stripped.size(); ++i) {
    const char c = stripped[i];
    if (c == '_' && !digits.empty() && i + 1 < stripped.size() && stripped[i + 1] != '_') continue;
    const int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    digits += c;
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  const long long value = std::strtoll((sign + digits).c_str(), nullptr, base);
  if (errno == ERANGE) return std::nullopt;
  return value;
}

std::optional<double> parse_float(const std::string& text) {
  std::string stripped = py::strip(text, std::nullopt, true, true);
  stripped.erase(std::remove(stripped.begin(), stripped.end(), '_'), stripped.end());
  if (stripped.empty()) return std::nullopt;
  const std::string lowered = py::lower(stripped);
  const std::string unsigned_part = lowered[0] == '+' || lowered[0] == '-' ? lowered.substr(1) : lowered;
  if (unsigned_part == "inf" || unsigned_part == "infinity" || unsigned_part == "nan") {
    const double v = unsigned_part == "nan" ? NAN : INFINITY;
    return lowered[0] == '-' ? -v : v;
  }
  if (unsigned_part.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(stripped.c_str(), &end);
  if (end != stripped.c_str() + stripped.size()) return std::nullopt;
  return value;
}

void check_hashable(const Value& value) {
  if ((value.is_list() && !value.is_tuple()) || value.is_dict())
    throw TemplateError(fmt::format("unhashable type: '{}'", type_name(value)));
}

int64_t checked_length(const Value& value) {
  switch (value.type()) {
    case Value::Type::Undefined: return 0;
    case Value::Type::String: return static_cast<int64_t>(py::length(value.as_string()));
    case Value::Type::List: return static_cast<int64_t>(value.as_list().size());
    case Value::Type::Dict: return static_cast<int64_t>(value.as_dict().entries.size());
    default: throw TemplateError(fmt::format("object of type '{}' has no len()", type_name(value)));
  }
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

double python_round(double x, int64_t digits) {
  if (!std::isfinite(x) || digits > 300) return x;
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double scaled = x * scale;
  return std::nearbyint(scaled) / scale;  // ties to even, as Python's round
}

// ---- filters ----

Value f_abs(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "abs", {});
  if (v.type() == Value::Type::Float) return Value::number(std::fabs(v.as_float()));
  if (v.is_number()) {
    if (v.as_int() == INT64_MIN) throw TemplateError("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  throw TemplateError(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

Value f_attr(Evaluator&, const Value& v, const CallArgs& args) {
  // Python's getattr only: a dict's keys are not its attributes.
  const std::string name = to_str(BoundArgs(args, "attr", {"name"}).required(0));
  Value found = get_attribute(v, name);
  if (v.is_dict() && found.type() != Value::Type::Function)
    return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
  return found;
}

Value f_capitalize(Evaluator& ev, const Value& v, const CallArgs& args) {
  BoundArgs(args, "capitalize", {});
  return ev.make_string(py::capitalize(to_str(v)));
}

Value f_center(Evaluator& ev, const Value& v, const CallArgs& args) {
  const int64_t width = BoundArgs(args, "center", {"width"}).integer(0, 80);
  const std::string text = to_str(v);
  const int64_t length = static_cast<int64_t>(py::length(text));
  if (width <= length) return Value::string(text);
  ev.check_size(static_cast<uint64_t>(width) + text.size());
  const size_t pad = static_cast<size_t>(width - length);
  const size_t left = pad / 2 + (pad & static_cast<size_t>(width) & 1);
  return ev.make_string(std::string(left, ' ') + text + std::string(pad - left, ' '));
}

Value f_default(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "default", {"default_value", "boolean"});
  if (v.is_undefined() || (bound.flag(1, false) && !truthy(v))) return bound.value(0, Value::string(""));
  return v;
}

Value f_dictsort(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw TemplateError("You can only sort by either a mapping");
  const bool case_sensitive = bound.flag(0, false);
  const std::string by = bound.string(1, "key");
  if (by != "key" && by != "value") throw TemplateError("You can only sort by either \"key\" or \"value\"");
  const bool reverse = bound.flag(2, false);
  std::vector<std::pair<Value, Value>> entries = v.as_dict().entries;
  auto key = [&](const std::pair<Value, Value>& e) {
    return sort_key(by == "key" ? e.first : e.second, std::nullopt, case_sensitive);
  };
  std::stable_sort(entries.begin(), entries.end(),
                   [&](const auto& a, const auto& b) { return reverse ? less(key(b), key(a)) : less(key(a), key(b)); });
  List out;
  for (auto& [k, item] : entries) out.push_back(Value::list({k, item}, true));
  return Value::list(std::move(out));
}

Value f_escape(Evaluator& ev, const Value& v, const CallArgs& args) {
  BoundArgs(args, "escape", {});
  return ev.make_string(html_escape(to_str(v)));
}

Value f_first(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "first", {});
  if (v.is_list())
    return v.as_list().empty() ? Value::undefined("No first item, sequence was empty.") : v.as_list().front();
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "last", {});
  if (v.is_list())
    return v.as_list().empty() ? Value::undefined("No last item, sequence was empty.") : v.as_list().back();
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_float(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "float", {"default"});
  if (v.is_undefined()) throw TemplateError(v.undefined_message());  // float(Undefined) raises
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    if (const auto parsed = parse_float(v.as_string())) return Value::number(*parsed);
  }
  return bound.value(0, Value::number(0.0));
}

// jinja2's indent and truncate take a string and treat anything else as Python would (s += "\n", len(s)).
void require_text(const Value& v, const char* what) {
  if (v.is_undefined()) throw TemplateError(v.undefined_message());
  if (!v.is_string()) throw TemplateError(fmt::format(what, type_name(v)));
}

Value f_format(Evaluator& ev, const Value& v, const CallArgs& args) {
  // jinja2: soft_str(value) % (kwargs or args); named %(key)s fields are not supported here.
  if (!args.keyword.empty()) throw TemplateError("the format filter with keyword arguments is not supported");
  return ev.make_string(percent_format(to_str(v), Value::list(args.positional, true)));
}

Value f_indent(Evaluator& ev, const Value& v, const CallArgs& args) {
  require_text(v, "unsupported operand type(s) for +=: '{}' and 'str'");
  const BoundArgs bound(args, "indent", {"width", "first", "blank"});
  std::string indention = "    ";
  if (const Value* width = bound.get(0)) {
    if (width->is_string()) {
      indention = width->as_string();
    } else {
      const int64_t n = bound.integer(0, 4);
      ev.check_size(static_cast<uint64_t>(std::max<int64_t>(n, 0)));
      indention = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    }
  }
  const bool first = bound.flag(1, false), blank = bound.flag(2, false);
  const std::vector<std::string> lines = py::splitlines(v.as_string() + "\n", false);
  ev.check_size(v.as_string().size() + lines.size() * (indention.size() + 1));
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (first) out = indention + out;
  return ev.make_string(std::move(out));
}

Value f_int(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "int", {"default", "base"});
  if (v.is_undefined()) throw TemplateError(v.undefined_message());  // int(Undefined) raises
  const int64_t base = bound.integer(1, 10);
  if (v.type() == Value::Type::Float) {
    if (std::isfinite(v.as_float()) && std::fabs(v.as_float()) < 9.2e18)
      return Value::integer(static_cast<int64_t>(v.as_float()));
  } else if (v.is_number()) {
    return Value::integer(v.as_int());
  } else if (v.is_string()) {
    if (const auto parsed = parse_int(v.as_string(), static_cast<int>(base))) return Value::integer(*parsed);
    if (const auto as_float = parse_float(v.as_string())) {
      if (std::isfinite(*as_float) && std::fabs(*as_float) < 9.2e18)
        return Value::integer(static_cast<int64_t>(*as_float));
    }
  }
  return bound.value(0, Value::integer(0));
}

Value f_items(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "items", {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [key, item] : v.as_dict().entries) out.push_back(Value::list({key, item}, true));
  return Value::list(std::move(out));
}

Value f_join(Evaluator& ev, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "join", {"d", "attribute"});
  const std::string separator = to_str(bound.value(0, Value::string("")));
  const std::optional<std::string> attribute =
      bound.has(1) ? std::optional<std::string>(to_str(*bound.get(1))) : std::nullopt;
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += separator;
    first = false;
    out += to_str(attribute ? lookup_path(item, *attribute, nullptr) : item);
    ev.check_size(out.size());
  }
  return ev.make_string(std::move(out));
}

Value f_length(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "length", {});
  return Value::integer(checked_length(v));
}

Value f_list(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "list", {});
  return Value::list(iterate(v));
}

Value f_lower(Evaluator& ev, const Value& v, const CallArgs& args) {
  BoundArgs(args, "lower", {});
  return ev.make_string(py::lower(to_str(v)));
}

Value f_upper(Evaluator& ev, const Value& v, const CallArgs& args) {
  BoundArgs(args, "upper", {});
  return ev.make_string(py::upper(to_str(v)));
}

Value f_map(Evaluator& ev, const Value& v, const CallArgs& args) {
  const List items = truthy(v) ? iterate(v) : List{};  // jinja2 maps nothing over a falsy value
  List out;
  out.reserve(items.size());
  if (args.positional.empty()) {
    const BoundArgs bound(args, "map", {"attribute", "default"});
    const std::string attribute = to_str(bound.required(0));
    const Value* fallback = bound.get(1);
    for (const Value& item : items) out.push_back(lookup_path(item, attribute, fallback));
    return Value::list(std::move(out));
  }
  const std::string name = to_str(args.positional[0]);
  const FilterFn filter = find_filter(name);
  if (!filter) throw TemplateError(fmt::format("no filter named '{}'", name));
  const CallArgs rest = rest_of(args, 1);
  for (const Value& item : items) {
    ev.charge_steps(1);
    out.push_back(filter(ev, item, rest));
  }
  return Value::list(std::move(out));
}

Value min_or_max(const Value& v, const CallArgs& args, const char* name, bool want_max) {
  const BoundArgs bound(args, name, {"case_sensitive", "attribute"});
  const bool case_sensitive = bound.flag(0, false);
  const std::optional<std::string> attribute =
      bound.has(1) ? std::optional<std::string>(to_str(*bound.get(1))) : std::nullopt;
  const List items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], attribute, case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], attribute, case_sensitive);
    if (want_max ? less(best_key, key) : less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_max(Evaluator&, const Value& v, const CallArgs& args) { return min_or_max(v, args, "max", true); }
Value f_min(Evaluator&, const Value& v, const CallArgs& args) { return min_or_max(v, args, "min", false); }

// select/reject: items for which the named test (or truthiness) holds, or fails.
Value select_items(Evaluator& ev, const Value& v, const CallArgs& args, bool keep, bool by_attribute) {
  size_t next = 0;
  std::optional<std::string> attribute;
  if (by_attribute) {
    if (args.positional.empty()) throw TemplateError("Missing parameter for attribute name");
    attribute = to_str(args.positional[next++]);
  }
  TestFn test = nullptr;
  if (args.positional.size() > next) {
    const std::string name = to_str(args.positional[next++]);
    test = find_test(name);
    if (!test) throw TemplateError(fmt::format("no test named '{}'", name));
  }
  const CallArgs rest = rest_of(args, next);
  List out;
  if (!truthy(v)) return Value::list(std::move(out));  // as jinja2: a falsy value selects nothing
  for (const Value& item : iterate(v)) {
    ev.charge_steps(1);
    const Value subject = attribute ? lookup_path(item, *attribute, nullptr) : item;
    const bool passes = test ? test(ev, subject, rest) : truthy(subject);
    if (passes == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Evaluator& ev, const Value& v, const CallArgs& args) { return select_items(ev, v, args, true, false); }
Value f_reject(Evaluator& ev, const Value& v, const CallArgs& args) { return select_items(ev, v, args, false, false); }
Value f_selectattr(Evaluator& ev, const Value& v, const CallArgs& args) {
  return select_items(ev, v, args, true, true);
}
Value f_rejectattr(Evaluator& ev, const Value& v, const CallArgs& args) {
  return select_items(ev, v, args, false, true);
}

Value f_replace(Evaluator& ev, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "replace", {"old", "new", "count"});
  const std::string text = to_str(v);
  const std::string old_text = to_str(bound.required(0));
  const std::string new_text = to_str(bound.required(1));
  const int64_t count = bound.integer(2, -1);
  const int64_t hits = old_text.empty() ? static_cast<int64_t>(py::length(text)) + 1 : py::count(text, old_text);
  ev.check_size(text.size() + static_cast<uint64_t>(count < 0 ? hits : std::min(count, hits)) * new_text.size());
  return ev.make_string(py::replace(text, old_text, new_text, count));
}

Value f_reverse(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "reverse", {});
  if (v.is_string()) return get_slice(v, Value::none(), Value::none(), Value::integer(-1));
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_round(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "round", {"precision", "method"});
  const int64_t precision = bound.integer(0, 0);
  const std::string method = bound.string(1, "common");
  if (method != "common" && method != "ceil" && method != "floor")
    throw TemplateError("method must be common, ceil or floor");
  if (!v.is_number()) throw TemplateError(fmt::format("type {} doesn't define __round__ method", type_name(v)));
  if (method == "common") {
    if (v.type() != Value::Type::Float) return Value::integer(v.as_int());
    return Value::number(python_round(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value f_safe(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "safe", {});
  return v.is_string() ? v : Value::string(to_str(v));
}

Value f_sort(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = bound.flag(0, false), case_sensitive = bound.flag(1, false);
  const std::optional<std::string> attribute =
      bound.has(2) ? std::optional<std::string>(to_str(*bound.get(2))) : std::nullopt;
  List items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  keyed.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(items[i], attribute, case_sensitive), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less(b.first, a.first) : less(a.first, b.first);
  });
  List out;
  out.reserve(items.size());
  for (const auto& [key, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Evaluator& ev, const Value& v, const CallArgs& args) {
  BoundArgs(args, "string", {});
  return v.is_string() ? v : ev.make_string(to_str(v));
}

Value f_sum(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "sum", {"attribute", "start"});
  const std::optional<std::string> attribute =
      bound.has(0) ? std::optional<std::string>(to_str(*bound.get(0))) : std::nullopt;
  Value total = bound.value(1, Value::integer(0));
  for (const Value& item : iterate(v)) {
    const Value x = attribute ? lookup_path(item, *attribute, nullptr) : item;
    if (!total.is_number() || !x.is_number()) {
      throw TemplateError(
          fmt::format("unsupported operand type(s) for +: '{}' and '{}'", type_name(total), type_name(x)));
    }
    if (total.type() == Value::Type::Float || x.type() == Value::Type::Float) {
      total = Value::number(total.as_float() + x.as_float());
    } else {
      int64_t sum = 0;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &sum)) throw TemplateError("integer overflow");
      total = Value::integer(sum);
    }
  }
  return total;
}

Value f_title(Evaluator& ev, const Value& v, const CallArgs& args) {
  BoundArgs(args, "title", {});
  // jinja2's own title: the first character of each word (after whitespace, -, (, {, [ or <) upper,
  // the rest lower; not str.title(), which also starts a word after an apostrophe.
  const std::string text = to_str(v);
  const py::CodePoints cp = py::code_points(text);
  auto is_break = [](uint32_t c) {
    return py::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  bool at_start = true;
  for (size_t i = 0; i < cp.chars.size(); ++i) {
    const std::string c = text.substr(cp.offsets[i], cp.offsets[i + 1] - cp.offsets[i]);
    if (is_break(cp.chars[i])) {
      out += c;
      at_start = true;
    } else {
      out += at_start ? py::upper(c) : py::lower(c);
      at_start = false;
    }
  }
  return ev.make_string(std::move(out));
}

Value f_tojson(Evaluator& ev, const Value& v, const CallArgs& args) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  const BoundArgs bound(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions options;
  options.ensure_ascii = bound.flag(0, false);
  if (const Value* indent = bound.get(1); indent && !indent->is_none()) {
    if (indent->is_string()) {
      options.indent = indent->as_string();
    } else {
      const int64_t n = std::max<int64_t>(bound.integer(1, 0), 0);
      ev.check_size(static_cast<uint64_t>(n));
      options.indent = std::string(static_cast<size_t>(n), ' ');
    }
    options.item_separator = ",";
  }
  if (const Value* separators = bound.get(2); separators && !separators->is_none()) {
    const List parts = iterate(*separators);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      throw TemplateError("tojson(): separators must be two strings");
    options.item_separator = parts[0].as_string();
    options.key_separator = parts[1].as_string();
  }
  options.sort_keys = bound.flag(3, false);
  return ev.make_string(to_json(v, options));
}

Value f_trim(Evaluator& ev, const Value& v, const CallArgs& args) {
  const auto chars = BoundArgs(args, "trim", {"chars"}).string(0);
  return ev.make_string(py::strip(to_str(v), chars, true, true));
}

Value f_truncate(Evaluator& ev, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "truncate", {"length", "killwords", "end", "leeway"});
  if (v.is_undefined()) return v;
  if (!v.is_string()) {
    if (!v.is_list() && !v.is_dict())
      throw TemplateError(fmt::format("object of type '{}' has no len()", type_name(v)));
    if (checked_length(v) <= bound.integer(0, 255) + bound.integer(3, 5)) return v;
    throw TemplateError(fmt::format("'{}' object has no attribute 'rsplit'", type_name(v)));
  }
  const std::string text = v.as_string();
  const int64_t length = bound.integer(0, 255);
  const bool killwords = bound.flag(1, false);
  const std::string end = bound.string(2, "...");
  const int64_t leeway = bound.integer(3, 5);
  const int64_t end_length = static_cast<int64_t>(py::length(end));
  if (length < end_length) throw TemplateError(fmt::format("expected length >= {}, got {}", end_length, length));
  if (leeway < 0) throw TemplateError(fmt::format("expected leeway >= 0, got {}", leeway));
  const py::CodePoints cp = py::code_points(text);
  if (static_cast<int64_t>(cp.chars.size()) <= length + leeway) return Value::string(text);
  const std::string head = text.substr(0, cp.offsets[static_cast<size_t>(length - end_length)]);
  if (killwords) return ev.make_string(head + end);
  const std::vector<std::string> parts = py::rsplit(head, std::string(" "), 1);
  return ev.make_string(parts.front() + end);
}

Value f_unique(Evaluator&, const Value& v, const CallArgs& args) {
  const BoundArgs bound(args, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = bound.flag(0, false);
  const std::optional<std::string> attribute =
      bound.has(1) ? std::optional<std::string>(to_str(*bound.get(1))) : std::nullopt;
  List out, seen;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(item, attribute, case_sensitive);
    check_hashable(key);  // unique keeps a Python set of what it has seen
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Evaluator&, const Value& v, const CallArgs& args) {
  BoundArgs(args, "wordcount", {});
  const std::string text = to_str(v);
  const py::CodePoints cp = py::code_points(text);
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < cp.chars.size(); ++i) {
    const bool word_char =
        cp.chars[i] == '_' ||
        py::str_is(text.substr(cp.offsets[i], cp.offsets[i + 1] - cp.offsets[i]), py::CharTest::Alnum);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

// ---- tests ----

bool t_defined(Evaluator&, const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Evaluator&, const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(Evaluator&, const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(Evaluator&, const Value& v, const CallArgs&) { return v.type() == Value::Type::Bool; }
bool t_false(Evaluator&, const Value& v, const CallArgs&) { return v.type() == Value::Type::Bool && !v.as_bool(); }
bool t_true(Evaluator&, const Value& v, const CallArgs&) { return v.type() == Value::Type::Bool && v.as_bool(); }
bool t_integer(Evaluator&, const Value& v, const CallArgs&) { return v.type() == Value::Type::Int; }
bool t_float(Evaluator&, const Value& v, const CallArgs&) { return v.type() == Value::Type::Float; }
bool t_number(Evaluator&, const Value& v, const CallArgs&) { return v.is_number(); }
bool t_string(Evaluator&, const Value& v, const CallArgs&) { return v.is_string(); }
bool t_mapping(Evaluator&, const Value& v, const CallArgs&) { return v.is_dict(); }
bool t_iterable(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
// jinja2's Undefined defines __call__ (to raise), so Python calls it callable.
bool t_callable(Evaluator&, const Value& v, const CallArgs&) {
  return v.type() == Value::Type::Function || v.is_undefined();
}
bool t_escaped(Evaluator&, const Value&, const CallArgs&) { return false; }

bool t_sameas(Evaluator&, const Value& v, const CallArgs& args) {
  const Value& other = BoundArgs(args, "sameas", {"other"}).required(0);
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case Value::Type::Undefined: return false;
    case Value::Type::None: return true;
    case Value::Type::Bool: return v.as_bool() == other.as_bool();
    case Value::Type::Int:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;  // CPython's cached ints
    default: return v.identity() == other.identity();
  }
}

int64_t integer_operand(const Value& v, const char* test) {
  if (v.type() != Value::Type::Int && v.type() != Value::Type::Bool) {
    throw TemplateError(fmt::format("the '{}' test needs an integer, not {}", test, type_name(v)));
  }
  return v.as_int();
}

// value % 2 == 1 (odd) or == 0 (even), with Python's modulo, floats included.
double mod2(const Value& v, const char* test) {
  if (v.is_undefined()) throw TemplateError(v.undefined_message());
  if (!v.is_number()) throw TemplateError(fmt::format("the '{}' test needs a number, not {}", test, type_name(v)));
  if (v.type() != Value::Type::Float) return static_cast<double>(((v.as_int() % 2) + 2) % 2);
  const double m = std::fmod(v.as_float(), 2.0);
  return m < 0 ? m + 2.0 : m;
}

bool t_odd(Evaluator&, const Value& v, const CallArgs&) { return mod2(v, "odd") == 1.0; }
bool t_even(Evaluator&, const Value& v, const CallArgs&) { return mod2(v, "even") == 0.0; }
bool t_divisibleby(Evaluator&, const Value& v, const CallArgs& args) {
  const Value& n = BoundArgs(args, "divisibleby", {"num"}).required(0);
  if (v.type() == Value::Type::Float || n.type() == Value::Type::Float) {
    if (n.as_float() == 0) throw TemplateError("float modulo");
    return std::fmod(v.as_float(), n.as_float()) == 0;
  }
  const int64_t d = integer_operand(n, "divisibleby");
  if (d == 0) throw TemplateError("integer division or modulo by zero");
  return integer_operand(v, "divisibleby") % d == 0;
}

bool t_lower(Evaluator&, const Value& v, const CallArgs&) { return py::str_is(to_str(v), py::CharTest::Lower); }
bool t_upper(Evaluator&, const Value& v, const CallArgs&) { return py::str_is(to_str(v), py::CharTest::Upper); }

const Value& other_operand(const CallArgs& args, const char* test) {
  return BoundArgs(args, test, {"other"}).required(0);
}

bool t_eq(Evaluator&, const Value& v, const CallArgs& args) { return equal(v, other_operand(args, "eq")); }
bool t_ne(Evaluator&, const Value& v, const CallArgs& args) { return !equal(v, other_operand(args, "ne")); }
bool t_lt(Evaluator&, const Value& v, const CallArgs& args) { return less(v, other_operand(args, "lt")); }
bool t_gt(Evaluator&, const Value& v, const CallArgs& args) { return less(other_operand(args, "gt"), v); }
bool t_le(Evaluator&, const Value& v, const CallArgs& args) {
  const Value& other = other_operand(args, "le");
  return less(v, other) || equal(v, other);
}
bool t_ge(Evaluator&, const Value& v, const CallArgs& args) {
  const Value& other = other_operand(args, "ge");
  return less(other, v) || equal(v, other);
}

bool t_in(Evaluator&, const Value& v, const CallArgs& args) {
  const Value& seq = BoundArgs(args, "in", {"seq"}).required(0);
  if (seq.is_string()) {
    if (!v.is_string())
      throw TemplateError(fmt::format("'in <string>' requires string as left operand, not {}", type_name(v)));
    return seq.as_string().find(v.as_string()) != std::string::npos;
  }
  if (seq.is_dict()) {
    check_hashable(v);
    return seq.as_dict().find(v) != nullptr;
  }
  for (const Value& item : iterate(seq)) {
    if (equal(item, v)) return true;
  }
  return false;
}

bool t_filter(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(Evaluator&, const Value& v, const CallArgs&) {
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};
struct TestEntry {
  const char* name;
  TestFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

const TestEntry kTests[] = {
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {">=", t_ge},
    {"gt", t_gt},
    {">", t_gt},
    {"greaterthan", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"<=", t_le},
    {"lower", t_lower},
    {"lt", t_lt},
    {"<", t_lt},
    {"lessthan", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"!=", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

}  // namespace

FilterFn find_filter(const std::string& name) {
  for (const FilterEntry& entry : kFilters) {
    if (name == entry.name) return entry.fn;
  }
  return nullptr;
}

TestFn find_test(const std::string& name) {
  for (const TestEntry& entry : kTests) {
    if (name == entry.name) return entry.fn;
  }
  return nullptr;
}

}  // namespace kvc::jinja
