#pragma once
// The values a chat template computes with, and the Python semantics Jinja gives them: truthiness,
// equality and ordering, str() and repr(), and json.dumps (the tojson filter). Strings, lists and dicts
// are immutable and shared, as they are under transformers' ImmutableSandboxedEnvironment; only
// namespace() objects change, and they change in place for everyone holding them.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvc::jinja {

// An error while parsing or rendering. `line` is 0 until the node that failed is known; the evaluator
// fills it in on the way out. `raised` marks raise_exception(), the template's own refusal.
class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& message, int line = 0, bool raised = false)
      : std::runtime_error(message), line_(line), raised_(raised) {}
  int line() const { return line_; }
  bool raised() const { return raised_; }
  void set_line(int line) { line_ = line; }

 private:
  int line_;
  bool raised_;
};

// Values can link without bound (a namespace holding a list holding another namespace, a macro kept in
// the scope of another macro): freeing such a chain recursively could overflow the stack. Shared
// payloads are made with make_shared_value, whose deleter queues what a release frees in turn and
// frees it one after another.
void release_deferred(void* payload, void (*destroy)(void*));
template <typename T>
struct DeferredDelete {
  void operator()(T* payload) const {
    release_deferred(payload, [](void* p) { delete static_cast<T*>(p); });
  }
};
template <typename T, typename... Args>
std::shared_ptr<T> make_shared_value(Args&&... args) {
  return std::shared_ptr<T>(new T(std::forward<Args>(args)...), DeferredDelete<T>{});
}

// Lists and dicts, which never change once built, nest at most this deep (a template that nests them
// further fails); Python's own operations on them (==, <, repr, json) recurse that far at most.
constexpr int kMaxNesting = 200;

class Value;
class Evaluator;
using List = std::vector<Value>;
struct Dict;
struct Object;
struct CallArgs;
// A callable: a global function (range, namespace, ...), a macro, or a bound method ('x'.strip).
struct Function {
  std::string name;
  std::function<Value(Evaluator&, const CallArgs&)> call;
};

class Value {
 public:
  enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object, Function };

  Value() = default;  // undefined, with no hint
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(List items, bool tuple = false);
  static Value dict(Dict entries);
  static Value object(std::shared_ptr<Object> object);
  static Value function(std::string name, std::function<Value(Evaluator&, const CallArgs&)> call);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_string() const { return type_ == Type::String; }
  bool is_list() const { return type_ == Type::List; }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_tuple() const { return type_ == Type::List && tuple_; }
  // Python's int includes bool; is_integer() is int proper, is_number() int, float or bool.
  bool is_integer() const { return type_ == Type::Int; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Float || type_ == Type::Bool; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return type_ == Type::Bool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return type_ == Type::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *static_cast<const std::string*>(ptr_.get()); }
  const List& as_list() const { return *static_cast<const List*>(ptr_.get()); }
  const Dict& as_dict() const { return *static_cast<const Dict*>(ptr_.get()); }
  Object& as_object() const { return *static_cast<Object*>(ptr_.get()); }
  const Function& as_function() const { return *static_cast<const Function*>(ptr_.get()); }
  // The message an undefined value reports when it is used: "'x' is undefined".
  std::string undefined_message() const;
  // Identity, for `is sameas` and for comparing namespaces and functions.
  const void* identity() const { return ptr_.get(); }
  int depth() const { return depth_; }

 private:
  Type type_ = Type::Undefined;
  bool tuple_ = false;
  uint16_t depth_ = 0;  // of a list or dict: 1 + its deepest list or dict item
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;  // in insertion order, as Python's dict keeps them
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
};

// namespace() objects (assignable attributes) and loop objects (read-only).
struct Object {
  std::string class_name;  // "Namespace" or "LoopContext"
  bool assignable = false;
  std::vector<std::pair<std::string, Value>> attributes;
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);
};

// Arguments of a call, a filter or a test, as the template wrote them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Python's type name, for error messages: 'str', 'int', 'dict', 'NoneType', 'Undefined', ...
std::string type_name(const Value& value);
bool truthy(const Value& value);
bool equal(const Value& a, const Value& b);
// a < b under Python's rules; throws TemplateError for types Python cannot order.
bool less(const Value& a, const Value& b);
// str(value) as Jinja prints it: undefined is empty, None is "None", containers are their repr.
std::string to_str(const Value& value);
std::string to_repr(const Value& value);

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps(indent=...): newlines and this much per level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // transformers' tojson passes ensure_ascii=False
};
// json.dumps(value, ...); throws TemplateError for what JSON cannot hold (undefined, namespaces).
std::string to_json(const Value& value, const JsonOptions& options);

}  // namespace kvc::jinja
