#pragma once
// The parsed template: expressions and statements, each with the line it came from. The shapes follow
// jinja2.nodes, so the evaluator can follow jinja2's semantics node for node.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace kvc::jinja {

class Evaluator;
using FilterFn = Value (*)(Evaluator&, const Value& input, const CallArgs& args);
using TestFn = bool (*)(Evaluator&, const Value& input, const CallArgs& args);

struct Expr {
  enum class Kind {
    Const,
    Name,
    List,
    Dict,
    Getattr,
    Getitem,
    Slice,
    Call,
    Filter,
    Test,
    Unary,
    Binary,
    Concat,
    Compare,
    Cond
  };
  Expr(Kind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  Kind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(Value v, int l) : Expr(Kind::Const, l), value(std::move(v)) {}
  Value value;
};
struct NameExpr : Expr {
  NameExpr(std::string n, int l) : Expr(Kind::Name, l), name(std::move(n)) {}
  std::string name;
};
struct ListExpr : Expr {  // [a, b] or the tuple (a, b)
  ListExpr(bool t, int l) : Expr(Kind::List, l), tuple(t) {}
  bool tuple;
  std::vector<ExprPtr> items;
};
struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(Kind::Dict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct GetattrExpr : Expr {  // object.name
  GetattrExpr(ExprPtr o, std::string n, int l) : Expr(Kind::Getattr, l), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};
struct GetitemExpr : Expr {  // object[index], index possibly a SliceExpr
  GetitemExpr(ExprPtr o, ExprPtr i, int l) : Expr(Kind::Getitem, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object, index;
};
struct SliceExpr : Expr {  // start:stop:step, each part optional
  explicit SliceExpr(int l) : Expr(Kind::Slice, l) {}
  ExprPtr start, stop, step;
};
struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};
struct CallExpr : Expr {
  CallExpr(ExprPtr c, int l) : Expr(Kind::Call, l), callee(std::move(c)) {}
  ExprPtr callee;
  Arguments args;
};
// value|name(args). A null operand stands for the body of {% filter %} or {% set x | f %}.
struct FilterExpr : Expr {
  FilterExpr(ExprPtr o, std::string n, FilterFn f, int l)
      : Expr(Kind::Filter, l), operand(std::move(o)), name(std::move(n)), fn(f) {}
  ExprPtr operand;
  std::string name;
  FilterFn fn;
  Arguments args;
};
struct TestExpr : Expr {  // value is name(args)
  TestExpr(ExprPtr o, std::string n, TestFn f, int l)
      : Expr(Kind::Test, l), operand(std::move(o)), name(std::move(n)), fn(f) {}
  ExprPtr operand;
  std::string name;
  TestFn fn;
  Arguments args;
};
struct UnaryExpr : Expr {
  enum class Op { Neg, Pos, Not };
  UnaryExpr(Op o, ExprPtr x, int l) : Expr(Kind::Unary, l), op(o), operand(std::move(x)) {}
  Op op;
  ExprPtr operand;
};
struct BinaryExpr : Expr {
  enum class Op { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, And, Or };
  BinaryExpr(Op o, ExprPtr a, ExprPtr b, int l)
      : Expr(Kind::Binary, l), op(o), left(std::move(a)), right(std::move(b)) {}
  Op op;
  ExprPtr left, right;
};
struct ConcatExpr : Expr {  // a ~ b ~ c
  explicit ConcatExpr(int l) : Expr(Kind::Concat, l) {}
  std::vector<ExprPtr> parts;
};
struct CompareExpr : Expr {  // a < b == c: chained as in Python
  enum class Op { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
  CompareExpr(ExprPtr f, int l) : Expr(Kind::Compare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<Op, ExprPtr>> rest;
};
struct CondExpr : Expr {  // then if test else otherwise; no else gives undefined
  CondExpr(ExprPtr t, ExprPtr a, ExprPtr b, int l)
      : Expr(Kind::Cond, l), test(std::move(t)), then(std::move(a)), otherwise(std::move(b)) {}
  ExprPtr test, then, otherwise;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// What `set` and `for` assign to: one name, `ns.attr`, or several names unpacked from a sequence.
struct AssignTarget {
  struct Item {
    std::string name;
    std::string attribute;  // non-empty for `{% set ns.attribute = ... %}`
  };
  std::vector<Item> items;
  bool unpack = false;
};

struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Scope, Break, Continue };
  Node(Kind k, int l) : kind(k), line(l) {}
  virtual ~Node() = default;
  Kind kind;
  int line;
};
struct TextNode : Node {
  TextNode(std::string t, int l) : Node(Kind::Text, l), text(std::move(t)) {}
  std::string text;
};
struct OutputNode : Node {
  OutputNode(ExprPtr e, int l) : Node(Kind::Output, l), expr(std::move(e)) {}
  ExprPtr expr;
};
struct IfNode : Node {
  explicit IfNode(int l) : Node(Kind::If, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body otherwise;
};
struct ForNode : Node {
  explicit ForNode(int l) : Node(Kind::For, l) {}
  AssignTarget target;
  ExprPtr iterable, filter;  // `for x in xs if filter`
  Body body, otherwise;
};
struct SetNode : Node {
  explicit SetNode(int l) : Node(Kind::Set, l) {}
  AssignTarget target;
  ExprPtr value;
};
struct SetBlockNode : Node {  // {% set x | filter %}body{% endset %}
  explicit SetBlockNode(int l) : Node(Kind::SetBlock, l) {}
  AssignTarget target;
  ExprPtr filter;  // a FilterExpr chain ending in a null operand, or null
  Body body;
};
// Which special names a macro's body reads; jinja2 passes caller, kwargs and varargs only then.
struct MacroUse {
  bool caller = false;
  bool kwargs = false;
  bool varargs = false;
};
struct MacroNode : Node {
  explicit MacroNode(int l) : Node(Kind::Macro, l) {}
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  MacroUse use;
};
struct CallBlockNode : Node {  // {% call(params) macro(args) %}body{% endcall %}: body is `caller`
  explicit CallBlockNode(int l) : Node(Kind::CallBlock, l) {}
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
  ExprPtr call;
  Body body;
  MacroUse use;
};
struct FilterBlockNode : Node {
  explicit FilterBlockNode(int l) : Node(Kind::FilterBlock, l) {}
  ExprPtr filter;
  Body body;
};
struct WithNode : Node {
  explicit WithNode(int l) : Node(Kind::With, l) {}
  std::vector<std::pair<AssignTarget, ExprPtr>> assignments;
  Body body;
};
struct ScopeNode : Node {  // {% generation %}: transformers' assistant-mask tag renders its body as is
  explicit ScopeNode(int l) : Node(Kind::Scope, l) {}
  Body body;
};

struct Program {
  Body body;
};

}  // namespace kvc::jinja
