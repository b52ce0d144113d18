#pragma once
// Runs a parsed template with jinja2's semantics: scopes (a for loop's body and a macro's body are
// scopes of their own, an if is not), undefined values, loop objects, macros and call blocks. A
// render is bounded: loop iterations and calls, the size of any one string, the bytes of all strings
// built and the depth of macro recursion each have a limit, so a hostile template ends with an error
// instead of running without end or exhausting memory.
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"

namespace kvc::jinja {

struct Limits {
  uint64_t max_steps = 2'000'000;                  // loop iterations plus calls
  size_t max_string_bytes = size_t{64} << 20;      // any one string, the output included
  uint64_t max_built_bytes = uint64_t{512} << 20;  // all strings a render builds together
  int max_call_depth = 100;                        // nested macro calls
};

class Evaluator {
 public:
  Evaluator(const Limits& limits, const std::tm& now);
  ~Evaluator();

  std::string render(const Program& program, const std::vector<std::pair<std::string, Value>>& variables);

  // For the builtins: the time strftime_now() reports, the accounting of work and string sizes, and
  // calling what the template passes around (macros, filters and tests named by string).
  const std::tm& now() const { return now_; }
  void charge_steps(uint64_t steps);
  void check_size(uint64_t bytes) const;  // throws when one string would exceed the limit
  Value make_string(std::string text);    // counts the bytes and checks the limit
  Value call(const Value& callee, const CallArgs& args);
  // namespace() objects and kept loop objects, emptied when the render ends (they may form cycles).
  void track(const std::shared_ptr<Object>& object);

 private:
  struct Scope;
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec(const Node& node, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_for(const ForNode& node, const std::shared_ptr<Scope>& scope, std::string& out);
  void assign(const AssignTarget& target, const Value& value, Scope& scope);
  Value make_macro(const std::string& name, const std::vector<std::string>& params,
                   const std::vector<ExprPtr>& defaults, const Body& body, const MacroUse& use,
                   const std::shared_ptr<Scope>& scope);
  Flow capture(const Body& body, const std::shared_ptr<Scope>& scope, std::string& text);
  Value apply_filter_chain(const Expr& filter, const Value& hole, const std::shared_ptr<Scope>& scope);

  Value eval(const Expr& expr, const std::shared_ptr<Scope>& scope);
  Value eval_inner(const Expr& expr, const std::shared_ptr<Scope>& scope);
  CallArgs eval_args(const Arguments& args, const std::shared_ptr<Scope>& scope);
  Value binary(BinaryExpr::Op op, const Value& left, const Value& right);
  bool compare(CompareExpr::Op op, const Value& left, const Value& right);
  void emit(std::string& out, const std::string& text);

  Limits limits_;
  std::tm now_;
  uint64_t steps_ = 0;
  uint64_t built_bytes_ = 0;
  int call_depth_ = 0;
  const Value* hole_ = nullptr;                 // what a null filter operand stands for, while a filter block runs
  std::vector<std::weak_ptr<Scope>> closures_;  // scopes macros close over
  std::vector<std::weak_ptr<Object>> objects_;
};

}  // namespace kvc::jinja
