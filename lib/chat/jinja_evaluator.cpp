#include "chat/jinja_evaluator.h"

#include <fmt/format.h>

#include <cmath>

#include "chat/jinja_builtins.h"
#include "chat/python_text.h"

namespace kvc::jinja {

// Variables of one scope. A for loop's iteration, a macro call and a with block each get one whose
// parent is the scope they appear in (lexically, so a macro sees where it was defined, not where it is
// called); `set` writes to the innermost. Scopes are shared because macros keep theirs alive.
struct Evaluator::Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      for (const auto& var : s->vars) {
        if (var.first == name) return &var.second;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& var : vars) {
      if (var.first == name) {
        var.second = std::move(value);
        return;
      }
    }
    vars.emplace_back(name, std::move(value));
  }
};

namespace {

// Python's ints do not overflow; ours stop at 64 bits with an error instead of wrapping.
int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw TemplateError("integer overflow");
  return r;
}
int64_t sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) throw TemplateError("integer overflow");
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw TemplateError("integer overflow");
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw TemplateError("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) throw TemplateError("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) throw TemplateError("integer division or modulo by zero");
  if (b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// CPython's float floor division (float_divmod): through fmod, so 1 // 0.1 is 9.0, not floor(10.000000000000002).
double float_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw TemplateError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
}

}  // namespace

Evaluator::Evaluator(const Limits& limits, const std::tm& now) : limits_(limits), now_(now) {}

// A macro kept in the scope it closes over, a namespace holding itself or a loop object: reference
// cycles a template can make. Emptying what could be part of one lets everything go with the render.
Evaluator::~Evaluator() {
  for (const std::weak_ptr<Scope>& closure : closures_) {
    if (const std::shared_ptr<Scope> scope = closure.lock()) scope->vars.clear();
  }
  for (const std::weak_ptr<Object>& tracked : objects_) {
    if (const std::shared_ptr<Object> object = tracked.lock()) object->attributes.clear();
  }
}

void Evaluator::track(const std::shared_ptr<Object>& object) { objects_.push_back(object); }

void Evaluator::charge_steps(uint64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    throw TemplateError(
        fmt::format("the template runs more than {} loop iterations and calls; stopped", limits_.max_steps));
  }
}

void Evaluator::check_size(uint64_t bytes) const {
  if (bytes > limits_.max_string_bytes) {
    throw TemplateError(
        fmt::format("the template builds a string longer than {} MiB; stopped", limits_.max_string_bytes >> 20));
  }
}

Value Evaluator::make_string(std::string text) {
  check_size(text.size());
  built_bytes_ += text.size();
  if (built_bytes_ > limits_.max_built_bytes) {
    throw TemplateError(
        fmt::format("the template builds more than {} MiB of text; stopped", limits_.max_built_bytes >> 20));
  }
  return Value::string(std::move(text));
}

void Evaluator::emit(std::string& out, const std::string& text) {
  check_size(out.size() + text.size());
  built_bytes_ += text.size();
  if (built_bytes_ > limits_.max_built_bytes) {
    throw TemplateError(
        fmt::format("the template builds more than {} MiB of text; stopped", limits_.max_built_bytes >> 20));
  }
  out += text;
}

std::string Evaluator::render(const Program& program, const std::vector<std::pair<std::string, Value>>& variables) {
  auto globals = make_shared_value<Scope>(nullptr);
  for (auto& [name, value] : global_functions()) globals->set(name, std::move(value));
  auto scope = make_shared_value<Scope>(globals);
  for (const auto& [name, value] : variables) scope->set(name, value);
  std::string out;
  exec_body(program.body, scope, out);
  return out;
}

Value Evaluator::call(const Value& callee, const CallArgs& args) {
  if (callee.type() == Value::Type::Function) {
    charge_steps(1);
    return callee.as_function().call(*this, args);
  }
  if (callee.is_undefined()) throw TemplateError(callee.undefined_message());
  throw TemplateError(fmt::format("'{}' object is not callable", type_name(callee)));
}

// ---- statements ----

Evaluator::Flow Evaluator::exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const NodePtr& node : body) {
    const Flow flow = exec(*node, scope, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::capture(const Body& body, const std::shared_ptr<Scope>& scope, std::string& text) {
  return exec_body(body, make_shared_value<Scope>(scope), text);
}

Evaluator::Flow Evaluator::exec(const Node& node, const std::shared_ptr<Scope>& scope, std::string& out) {
  try {
    switch (node.kind) {
      case Node::Kind::Text: emit(out, static_cast<const TextNode&>(node).text); return Flow::Normal;
      case Node::Kind::Output: {
        const Value value = eval(*static_cast<const OutputNode&>(node).expr, scope);
        if (value.is_string()) {
          emit(out, value.as_string());
        } else {
          emit(out, to_str(value));
        }
        return Flow::Normal;
      }
      case Node::Kind::If: {
        const auto& n = static_cast<const IfNode&>(node);
        for (const auto& [test, body] : n.branches) {
          if (truthy(eval(*test, scope))) return exec_body(body, scope, out);
        }
        return exec_body(n.otherwise, scope, out);
      }
      case Node::Kind::For: return exec_for(static_cast<const ForNode&>(node), scope, out);
      case Node::Kind::Set: {
        const auto& n = static_cast<const SetNode&>(node);
        assign(n.target, eval(*n.value, scope), *scope);
        return Flow::Normal;
      }
      case Node::Kind::SetBlock: {
        const auto& n = static_cast<const SetBlockNode&>(node);
        // A break or continue inside the block leaves the loop around it, and nothing is assigned.
        std::string text;
        if (const Flow flow = capture(n.body, scope, text); flow != Flow::Normal) return flow;
        Value value = make_string(std::move(text));
        if (n.filter) value = apply_filter_chain(*n.filter, value, scope);
        assign(n.target, value, *scope);
        return Flow::Normal;
      }
      case Node::Kind::Macro: {
        const auto& n = static_cast<const MacroNode&>(node);
        scope->set(n.name, make_macro(n.name, n.params, n.defaults, n.body, n.use, scope));
        return Flow::Normal;
      }
      case Node::Kind::CallBlock: {
        const auto& n = static_cast<const CallBlockNode&>(node);
        const auto& call = static_cast<const CallExpr&>(*n.call);
        const Value callee = eval(*call.callee, scope);
        CallArgs args = eval_args(call.args, scope);
        args.keyword.emplace_back("caller", make_macro("caller", n.params, n.defaults, n.body, n.use, scope));
        emit(out, to_str(this->call(callee, args)));
        return Flow::Normal;
      }
      case Node::Kind::FilterBlock: {
        const auto& n = static_cast<const FilterBlockNode&>(node);
        std::string text;
        if (const Flow flow = capture(n.body, scope, text); flow != Flow::Normal) return flow;
        const Value body = make_string(std::move(text));
        emit(out, to_str(apply_filter_chain(*n.filter, body, scope)));
        return Flow::Normal;
      }
      case Node::Kind::With: {
        const auto& n = static_cast<const WithNode&>(node);
        auto inner = make_shared_value<Scope>(scope);
        for (const auto& [target, value] : n.assignments) assign(target, eval(*value, scope), *inner);
        return exec_body(n.body, inner, out);
      }
      case Node::Kind::Scope: {
        exec_body(static_cast<const ScopeNode&>(node).body, make_shared_value<Scope>(scope), out);
        return Flow::Normal;
      }
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
    }
  } catch (TemplateError& e) {
    if (e.line() == 0) e.set_line(node.line);
    throw;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec_for(const ForNode& node, const std::shared_ptr<Scope>& scope, std::string& out) {
  List items = iterate(eval(*node.iterable, scope));
  if (node.filter) {
    // `for x in xs if test`: the test sees the loop variable, not `loop`; loop.length counts what passes.
    List kept;
    for (Value& item : items) {
      charge_steps(1);
      auto probe = make_shared_value<Scope>(scope);
      assign(node.target, item, *probe);
      if (truthy(eval(*node.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }

  // One loop object for the whole loop, advanced in place, as jinja2's LoopContext is.
  auto loop = make_shared_value<Object>();
  loop->class_name = "LoopContext";
  const int64_t length = static_cast<int64_t>(items.size());
  // loop.cycle reads the loop's position; a weak reference, since the loop object holds the function.
  const std::weak_ptr<Object> loop_state = loop;
  const Value cycle = Value::function("cycle", [loop_state](Evaluator&, const CallArgs& args) -> Value {
    if (args.positional.empty()) throw TemplateError("no items for cycling given");
    const std::shared_ptr<Object> state = loop_state.lock();
    if (!state) throw TemplateError("loop.cycle() called after its loop ended");
    const Value* index0 = state->find("index0");
    const int64_t i = index0 ? index0->as_int() : 0;
    return args.positional[static_cast<size_t>(i % static_cast<int64_t>(args.positional.size()))];
  });
  loop->attributes = {
      {"index0", Value()},
      {"index", Value()},
      {"revindex0", Value()},
      {"revindex", Value()},
      {"first", Value()},
      {"last", Value()},
      {"length", Value::integer(length)},
      {"previtem", Value()},
      {"nextitem", Value()},
      {"depth", Value::integer(1)},
      {"depth0", Value::integer(0)},
      {"cycle", cycle},
  };
  auto& attribute = loop->attributes;
  const Value loop_value = Value::object(loop);
  std::shared_ptr<Scope> iteration;
  bool completed = false;
  for (int64_t i = 0; i < length; ++i) {
    charge_steps(1);
    const size_t k = static_cast<size_t>(i);
    attribute[0].second = Value::integer(i);
    attribute[1].second = Value::integer(i + 1);
    attribute[2].second = Value::integer(length - i - 1);
    attribute[3].second = Value::integer(length - i);
    attribute[4].second = Value::boolean(i == 0);
    attribute[5].second = Value::boolean(i == length - 1);
    attribute[7].second = i > 0 ? items[k - 1] : Value::undefined("there is no previous item");
    attribute[8].second = i + 1 < length ? items[k + 1] : Value::undefined("there is no next item");
    // Each iteration starts from a fresh scope; the last one is reused unless a macro kept it.
    if (iteration && iteration.use_count() == 1) {
      iteration->vars.clear();
    } else {
      iteration = make_shared_value<Scope>(scope);
    }
    assign(node.target, items[k], *iteration);
    iteration->set("loop", loop_value);
    const Flow flow = exec_body(node.body, iteration, out);
    if (flow == Flow::Break) break;
    // jinja2 marks the loop as having run at the end of a body: an iteration cut short by break or
    // continue does not count, so the else block still runs when no iteration got to the end.
    if (flow == Flow::Normal) completed = true;
  }
  if (!completed && !node.otherwise.empty()) exec_body(node.otherwise, make_shared_value<Scope>(scope), out);
  if (loop.use_count() > 1) track(loop);  // something kept the loop object: it may be part of a cycle
  return Flow::Normal;
}

void Evaluator::assign(const AssignTarget& target, const Value& value, Scope& scope) {
  auto assign_one = [&](const AssignTarget::Item& item, const Value& v) {
    if (item.attribute.empty()) {
      scope.set(item.name, v);
      return;
    }
    const Value* object = scope.find(item.name);
    if (!object || object->type() != Value::Type::Object || !object->as_object().assignable) {
      throw TemplateError("cannot assign attribute on non-namespace object");
    }
    if (!item.attribute.empty() && item.attribute[0] == '_') {
      throw TemplateError(
          fmt::format("Chat templates cannot store underscore-prefixed attributes on a namespace, but got {}. "
                      "Please rename the attribute.",
                      py::repr(item.attribute)));
    }
    object->as_object().set(item.attribute, v);
  };
  if (!target.unpack) {
    assign_one(target.items.front(), value);
    return;
  }
  const List parts = iterate(value);
  if (parts.size() < target.items.size()) {
    throw TemplateError(
        fmt::format("not enough values to unpack (expected {}, got {})", target.items.size(), parts.size()));
  }
  if (parts.size() > target.items.size())
    throw TemplateError(fmt::format("too many values to unpack (expected {})", target.items.size()));
  for (size_t i = 0; i < parts.size(); ++i) assign_one(target.items[i], parts[i]);
}

Value Evaluator::make_macro(const std::string& name, const std::vector<std::string>& params,
                            const std::vector<ExprPtr>& defaults, const Body& body, const MacroUse& use,
                            const std::shared_ptr<Scope>& scope) {
  // The macro refers to its node's parts, which live as long as the Program the render runs.
  const std::vector<std::string>* param_list = &params;
  const std::vector<ExprPtr>* default_list = &defaults;
  const Body* macro_body = &body;
  const MacroUse uses = use;
  std::shared_ptr<Scope> closure = scope;
  closures_.push_back(scope);
  return Value::function(
      name, [name, param_list, default_list, macro_body, uses, closure](Evaluator& ev, const CallArgs& args) -> Value {
        if (ev.call_depth_ >= ev.limits_.max_call_depth) {
          throw TemplateError(fmt::format("macro calls nest more than {} deep", ev.limits_.max_call_depth));
        }
        struct DepthGuard {
          int& depth;
          explicit DepthGuard(int& d) : depth(d) { ++depth; }
          ~DepthGuard() { --depth; }
        } guard(ev.call_depth_);
        // jinja2's Macro.__call__: positional arguments, then keywords; caller, kwargs and varargs exist only
        // when the body reads them, and extra arguments are refused otherwise.
        auto frame = make_shared_value<Scope>(closure);
        const size_t count = param_list->size();
        const size_t first_default = count - default_list->size();
        std::vector<const Value*> bound(count, nullptr);
        for (size_t i = 0; i < args.positional.size() && i < count; ++i) bound[i] = &args.positional[i];
        Dict kwargs;
        const Value* caller = nullptr;
        for (const auto& [key, value] : args.keyword) {
          const auto it = std::find(param_list->begin(), param_list->end(), key);
          if (it != param_list->end() && !bound[static_cast<size_t>(it - param_list->begin())]) {
            bound[static_cast<size_t>(it - param_list->begin())] = &value;
          } else if (key == "caller" && uses.caller && !caller) {
            caller = &value;
          } else if (uses.kwargs) {
            kwargs.entries.emplace_back(Value::string(key), value);
          } else if (key == "caller") {
            throw TemplateError(fmt::format(
                "macro '{}' was invoked with two values for the special caller argument. This is most likely a bug.",
                name));
          } else {
            throw TemplateError(fmt::format("macro '{}' takes no keyword argument '{}'", name, key));
          }
        }
        if (args.positional.size() > count && !uses.varargs) {
          throw TemplateError(fmt::format("macro '{}' takes not more than {} argument(s)", name, count));
        }
        for (size_t i = 0; i < count; ++i) {
          const std::string& param = (*param_list)[i];
          if (bound[i]) {
            frame->set(param, *bound[i]);
          } else if (i >= first_default) {
            frame->set(param, ev.eval(*(*default_list)[i - first_default], frame));
          } else {
            frame->set(param, Value::undefined(fmt::format("parameter '{}' was not provided", param)));
          }
        }
        if (uses.caller) frame->set("caller", caller ? *caller : Value::undefined("No caller defined"));
        if (uses.kwargs) frame->set("kwargs", Value::dict(std::move(kwargs)));
        if (uses.varargs) {
          List rest;
          for (size_t i = count; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
          frame->set("varargs", Value::list(std::move(rest), true));
        }
        std::string text;
        ev.exec_body(*macro_body, frame, text);
        return Value::string(std::move(text));
      });
}

Value Evaluator::apply_filter_chain(const Expr& filter, const Value& hole, const std::shared_ptr<Scope>& scope) {
  const Value* saved = hole_;
  hole_ = &hole;
  try {
    Value result = eval(filter, scope);
    hole_ = saved;
    return result;
  } catch (...) {
    hole_ = saved;
    throw;
  }
}

// ---- expressions ----

Value Evaluator::eval(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  try {
    return eval_inner(expr, scope);
  } catch (TemplateError& e) {
    if (e.line() == 0) e.set_line(expr.line);
    throw;
  }
}

CallArgs Evaluator::eval_args(const Arguments& args, const std::shared_ptr<Scope>& scope) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const ExprPtr& arg : args.positional) out.positional.push_back(eval(*arg, scope));
  for (const auto& [key, arg] : args.keyword) out.keyword.emplace_back(key, eval(*arg, scope));
  return out;
}

Value Evaluator::eval_inner(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  switch (expr.kind) {
    case Expr::Kind::Const: return static_cast<const ConstExpr&>(expr).value;
    case Expr::Kind::Name: {
      const auto& name = static_cast<const NameExpr&>(expr).name;
      if (const Value* found = scope->find(name)) return *found;
      return Value::undefined(fmt::format("'{}' is undefined", name));
    }
    case Expr::Kind::List: {
      const auto& e = static_cast<const ListExpr&>(expr);
      List items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) items.push_back(eval(*item, scope));
      return Value::list(std::move(items), e.tuple);
    }
    case Expr::Kind::Dict: {
      const auto& e = static_cast<const DictExpr&>(expr);
      Dict dict;
      for (const auto& [key_expr, value_expr] : e.items) {
        Value key = eval(*key_expr, scope);
        if (key.is_list() && !key.is_tuple()) throw TemplateError("unhashable type: 'list'");
        if (key.is_dict()) throw TemplateError("unhashable type: 'dict'");
        Value value = eval(*value_expr, scope);
        bool replaced = false;
        for (auto& entry : dict.entries) {
          if (equal(entry.first, key)) {
            entry.second = value;
            replaced = true;
            break;
          }
        }
        if (!replaced) dict.entries.emplace_back(std::move(key), std::move(value));
      }
      return Value::dict(std::move(dict));
    }
    case Expr::Kind::Getattr: {
      const auto& e = static_cast<const GetattrExpr&>(expr);
      return get_attribute(eval(*e.object, scope), e.name);
    }
    case Expr::Kind::Getitem: {
      const auto& e = static_cast<const GetitemExpr&>(expr);
      const Value object = eval(*e.object, scope);
      if (e.index->kind == Expr::Kind::Slice) {
        const auto& s = static_cast<const SliceExpr&>(*e.index);
        auto part = [&](const ExprPtr& p) { return p ? eval(*p, scope) : Value::none(); };
        const Value start = part(s.start), stop = part(s.stop), step = part(s.step);
        return get_slice(object, start, stop, step);
      }
      return get_item(object, eval(*e.index, scope));
    }
    case Expr::Kind::Slice: throw TemplateError("a slice outside of a subscript");
    case Expr::Kind::Call: {
      const auto& e = static_cast<const CallExpr&>(expr);
      const Value callee = eval(*e.callee, scope);
      return call(callee, eval_args(e.args, scope));
    }
    case Expr::Kind::Filter: {
      const auto& e = static_cast<const FilterExpr&>(expr);
      Value input;
      if (e.operand) {
        input = eval(*e.operand, scope);
      } else if (hole_) {
        input = *hole_;
      }
      if (!e.fn) throw TemplateError(fmt::format("No filter named '{}' found.", e.name));
      return e.fn(*this, input, eval_args(e.args, scope));
    }
    case Expr::Kind::Test: {
      const auto& e = static_cast<const TestExpr&>(expr);
      const Value input = eval(*e.operand, scope);
      if (!e.fn) throw TemplateError(fmt::format("No test named '{}' found.", e.name));
      return Value::boolean(e.fn(*this, input, eval_args(e.args, scope)));
    }
    case Expr::Kind::Unary: {
      const auto& e = static_cast<const UnaryExpr&>(expr);
      const Value v = eval(*e.operand, scope);
      if (e.op == UnaryExpr::Op::Not) return Value::boolean(!truthy(v));
      if (v.is_undefined()) throw TemplateError(v.undefined_message());
      if (v.type() == Value::Type::Float)
        return Value::number(e.op == UnaryExpr::Op::Neg ? -v.as_float() : v.as_float());
      if (v.is_number()) {
        if (e.op == UnaryExpr::Op::Pos) return Value::integer(v.as_int());
        if (v.as_int() == INT64_MIN) throw TemplateError("integer overflow");
        return Value::integer(-v.as_int());
      }
      throw TemplateError(
          fmt::format("bad operand type for unary {}: '{}'", e.op == UnaryExpr::Op::Neg ? '-' : '+', type_name(v)));
    }
    case Expr::Kind::Binary: {
      const auto& e = static_cast<const BinaryExpr&>(expr);
      if (e.op == BinaryExpr::Op::And) {
        Value left = eval(*e.left, scope);
        return truthy(left) ? eval(*e.right, scope) : left;
      }
      if (e.op == BinaryExpr::Op::Or) {
        Value left = eval(*e.left, scope);
        return truthy(left) ? left : eval(*e.right, scope);
      }
      const Value left = eval(*e.left, scope);
      const Value right = eval(*e.right, scope);
      return binary(e.op, left, right);
    }
    case Expr::Kind::Concat: {
      std::string text;
      for (const ExprPtr& part : static_cast<const ConcatExpr&>(expr).parts) {
        const Value v = eval(*part, scope);
        text += v.is_string() ? v.as_string() : to_str(v);
        check_size(text.size());
      }
      return make_string(std::move(text));
    }
    case Expr::Kind::Compare: {
      const auto& e = static_cast<const CompareExpr&>(expr);
      Value left = eval(*e.first, scope);
      for (const auto& [op, right_expr] : e.rest) {
        Value right = eval(*right_expr, scope);
        if (!compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::Cond: {
      const auto& e = static_cast<const CondExpr&>(expr);
      if (truthy(eval(*e.test, scope))) return eval(*e.then, scope);
      if (e.otherwise) return eval(*e.otherwise, scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", expr.line));
    }
  }
  throw TemplateError("unknown expression");
}

Value Evaluator::binary(BinaryExpr::Op op, const Value& a, const Value& b) {
  // 'text' % undefined is Python's str formatting with a mapping-like argument, not an error.
  if (op == BinaryExpr::Op::Mod && a.is_string()) return make_string(percent_format(a.as_string(), b));
  if (a.is_undefined()) throw TemplateError(a.undefined_message());
  if (b.is_undefined()) throw TemplateError(b.undefined_message());
  const bool numbers = a.is_number() && b.is_number();
  const bool floats = numbers && (a.type() == Value::Type::Float || b.type() == Value::Type::Float);
  switch (op) {
    case BinaryExpr::Op::Add:
      if (floats) return Value::number(a.as_float() + b.as_float());
      if (numbers) return Value::integer(add(a.as_int(), b.as_int()));
      if (a.is_string() && b.is_string()) {
        check_size(a.as_string().size() + b.as_string().size());
        return make_string(a.as_string() + b.as_string());
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        check_size((a.as_list().size() + b.as_list().size()) * sizeof(Value));
        List items = a.as_list();
        items.insert(items.end(), b.as_list().begin(), b.as_list().end());
        return Value::list(std::move(items), a.is_tuple());
      }
      if (a.is_string() || a.is_list()) {
        throw TemplateError(
            fmt::format("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a)));
      }
      unsupported("+", a, b);
    case BinaryExpr::Op::Sub:
      if (floats) return Value::number(a.as_float() - b.as_float());
      if (numbers) return Value::integer(sub(a.as_int(), b.as_int()));
      unsupported("-", a, b);
    case BinaryExpr::Op::Mul: {
      if (floats) return Value::number(a.as_float() * b.as_float());
      if (numbers) return Value::integer(mul(a.as_int(), b.as_int()));
      const bool a_count = a.is_number() && a.type() != Value::Type::Float;
      const bool b_count = b.is_number() && b.type() != Value::Type::Float;
      const Value* sequence = a_count && (b.is_string() || b.is_list())   ? &b
                              : b_count && (a.is_string() || a.is_list()) ? &a
                                                                          : nullptr;
      if (!sequence) unsupported("*", a, b);
      const int64_t times = std::max<int64_t>(0, (sequence == &a ? b : a).as_int());
      if (sequence->is_string()) {
        const std::string& unit = sequence->as_string();
        if (!unit.empty() && static_cast<uint64_t>(times) > limits_.max_string_bytes / unit.size())
          check_size(limits_.max_string_bytes + 1);
        const size_t total = unit.size() * static_cast<size_t>(times);
        std::string out;
        out.reserve(total);
        if (times > 0) out = unit;
        while (!out.empty() && out.size() * 2 <= total)
          out += out;  // doubling: a long repeat costs no more than its bytes
        out.append(out.data(), total - out.size());
        return make_string(std::move(out));
      }
      const List& unit = sequence->as_list();
      if (!unit.empty() && static_cast<uint64_t>(times) > (limits_.max_string_bytes / sizeof(Value)) / unit.size()) {
        throw TemplateError("the template builds a list too long; stopped");
      }
      charge_steps(unit.size() * static_cast<uint64_t>(times) / 16);
      List out;
      for (int64_t i = 0; i < times; ++i) out.insert(out.end(), unit.begin(), unit.end());
      return Value::list(std::move(out), sequence->is_tuple());
    }
    case BinaryExpr::Op::Div:
      if (!numbers) unsupported("/", a, b);
      if (b.as_float() == 0.0) throw TemplateError("division by zero");
      return Value::number(a.as_float() / b.as_float());
    case BinaryExpr::Op::FloorDiv:
      if (!numbers) unsupported("//", a, b);
      if (floats) {
        if (b.as_float() == 0.0) throw TemplateError("float floor division by zero");
        return Value::number(float_floor_div(a.as_float(), b.as_float()));
      }
      return Value::integer(floor_div(a.as_int(), b.as_int()));
    case BinaryExpr::Op::Mod:
      if (!numbers) unsupported("%", a, b);
      if (floats) {
        if (b.as_float() == 0.0) throw TemplateError("float modulo");
        double m = std::fmod(a.as_float(), b.as_float());
        if (m != 0 && ((m < 0) != (b.as_float() < 0))) m += b.as_float();
        return Value::number(m);
      }
      return Value::integer(floor_mod(a.as_int(), b.as_int()));
    case BinaryExpr::Op::Pow: {
      if (!numbers) unsupported("** or pow()", a, b);
      if (floats || b.as_int() < 0) return Value::number(std::pow(a.as_float(), b.as_float()));
      int64_t result = 1, base = a.as_int(), exponent = b.as_int();
      while (exponent > 0) {
        if (exponent & 1) result = mul(result, base);
        exponent >>= 1;
        if (exponent > 0) base = mul(base, base);
      }
      return Value::integer(result);
    }
    default: break;
  }
  throw TemplateError("unknown operator");
}

bool Evaluator::compare(CompareExpr::Op op, const Value& a, const Value& b) {
  switch (op) {
    case CompareExpr::Op::Eq: return equal(a, b);
    case CompareExpr::Op::Ne: return !equal(a, b);
    case CompareExpr::Op::In:
    case CompareExpr::Op::NotIn: {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string())
          throw TemplateError(fmt::format("'in <string>' requires string as left operand, not {}", type_name(a)));
        found = b.as_string().find(a.as_string()) != std::string::npos;
      } else if (b.is_dict()) {
        if ((a.is_list() && !a.is_tuple()) || a.is_dict())
          throw TemplateError(fmt::format("unhashable type: '{}'", type_name(a)));
        found = b.as_dict().find(a) != nullptr;
      } else if (b.is_list()) {
        for (const Value& item : b.as_list()) {
          if (equal(item, a)) {
            found = true;
            break;
          }
        }
      } else if (!b.is_undefined()) {
        throw TemplateError(fmt::format("argument of type '{}' is not iterable", type_name(b)));
      }
      return op == CompareExpr::Op::In ? found : !found;
    }
    default: break;
  }
  if (a.is_undefined()) throw TemplateError(a.undefined_message());
  if (b.is_undefined()) throw TemplateError(b.undefined_message());
  switch (op) {
    case CompareExpr::Op::Lt: return less(a, b);
    case CompareExpr::Op::Gt: return less(b, a);
    case CompareExpr::Op::Le: return less(a, b) || equal(a, b);
    case CompareExpr::Op::Ge: return less(b, a) || equal(a, b);
    default: return false;
  }
}

}  // namespace kvc::jinja
