#include "chat/jinja_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <initializer_list>

#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"

namespace kvc::jinja {
namespace {

// Hostile input can nest brackets or blocks without end; past this depth the parser refuses instead of
// exhausting the stack.
constexpr int kMaxDepth = 200;

MacroUse macro_use(const Body& body);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program parse() {
    Program program;
    program.body = subparse({});
    return program;
  }

 private:
  using Tags = std::initializer_list<const char*>;

  struct OpenBlock {
    std::string tag;
    int line;
    std::vector<std::string> closers;
  };

  class DepthGuard {
   public:
    DepthGuard(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > kMaxDepth)
        parser_.fail(fmt::format("the template nests more than {} levels deep", kMaxDepth));
    }
    ~DepthGuard() { --parser_.depth_; }

   private:
    Parser& parser_;
  };

  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  int line() const { return cur().line; }

  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(message, line()); }
  [[noreturn]] void fail(const std::string& message, int at) const { throw TemplateError(message, at); }

  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  void expect_name_value(const char* name) {
    if (!skip_name(name)) fail(fmt::format("expected '{}', got {}", name, describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail(fmt::format("expected a name, got {}", describe(cur())));
    std::string name = cur().text;
    next();
    return name;
  }
  void expect(TokenType type, const char* what) {
    if (cur().type != type) fail(fmt::format("expected {}, got {}", what, describe(cur())));
    next();
  }
  static bool in(const std::string& text, Tags tags) {
    return std::any_of(tags.begin(), tags.end(), [&](const char* tag) { return text == tag; });
  }

  // ---- statements ----

  Body subparse(Tags end_tags) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& token = cur();
      switch (token.type) {
        case TokenType::Text:
          body.push_back(std::make_unique<TextNode>(token.text, token.line));
          next();
          break;
        case TokenType::VariableBegin: {
          next();
          const int at = line();
          ExprPtr expr = parse_tuple(false, true, {}, false);
          expect(TokenType::VariableEnd, "'}}'");
          body.push_back(std::make_unique<OutputNode>(std::move(expr), at));
          break;
        }
        case TokenType::BlockBegin:
          next();
          if (cur().type == TokenType::Name && in(cur().text, end_tags)) return body;
          parse_statement(body);
          expect(TokenType::BlockEnd, "'%}'");
          break;
        case TokenType::End:
          if (end_tags.size() != 0) fail_unclosed();
          return body;
        default: fail(fmt::format("unexpected {}", describe(token)));
      }
    }
  }

  [[noreturn]] void fail_unclosed() const {
    const OpenBlock& open = open_.back();
    fail(fmt::format("unexpected end of template: the '{}' block opened on line {} is never closed (expected '{}')",
                     open.tag, open.line, open.closers.front()));
  }

  // Body of a block statement up to one of `end_tags`; `drop` consumes that tag's name.
  Body parse_statements(Tags end_tags, bool drop) {
    skip_op(":");
    expect(TokenType::BlockEnd, "'%}'");
    Body body = subparse(end_tags);
    if (cur().type == TokenType::End) fail_unclosed();
    if (drop) next();
    return body;
  }

  void parse_statement(Body& out) {
    if (cur().type != TokenType::Name) fail(fmt::format("expected a tag name, got {}", describe(cur())));
    const std::string tag = cur().text;
    const int at = line();
    auto open = [&](std::vector<std::string> closers) { open_.push_back({tag, at, std::move(closers)}); };
    if (tag == "if") {
      open({"endif", "elif", "else"});
      out.push_back(parse_if());
    } else if (tag == "for") {
      open({"endfor", "else"});
      out.push_back(parse_for());
    } else if (tag == "set") {
      open({"endset"});
      out.push_back(parse_set());
    } else if (tag == "macro") {
      open({"endmacro"});
      out.push_back(parse_macro());
    } else if (tag == "call") {
      open({"endcall"});
      out.push_back(parse_call_block());
    } else if (tag == "filter") {
      open({"endfilter"});
      auto node = std::make_unique<FilterBlockNode>(at);
      next();
      node->filter = parse_filter(nullptr, true);
      node->body = parse_statements({"endfilter"}, true);
      out.push_back(std::move(node));
    } else if (tag == "with") {
      open({"endwith"});
      out.push_back(parse_with());
    } else if (tag == "generation") {
      open({"endgeneration"});
      auto node = std::make_unique<ScopeNode>(at);
      next();
      const int saved_loops = loop_depth_;  // the body is a macro's (transformers' CallBlock)
      loop_depth_ = 0;
      node->body = parse_statements({"endgeneration"}, true);
      loop_depth_ = saved_loops;
      out.push_back(std::move(node));
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(fmt::format("'{}' outside a for loop", tag));
      next();
      out.push_back(std::make_unique<Node>(tag == "break" ? Node::Kind::Break : Node::Kind::Continue, at));
      return;
    } else if (tag == "print") {
      next();
      for (bool first = true; cur().type != TokenType::BlockEnd; first = false) {
        if (!first) expect_op(",");
        out.push_back(std::make_unique<OutputNode>(parse_expression(true), at));
      }
      return;
    } else if (in(tag, {"block", "extends", "include", "import", "from", "autoescape"})) {
      fail(fmt::format("the '{}' tag is not supported in chat templates", tag));
    } else if (in(tag, {"elif", "else", "endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "endwith",
                        "endgeneration", "endraw"})) {
      if (open_.empty()) fail(fmt::format("unexpected '{}': no block is open", tag));
      const OpenBlock& inner = open_.back();
      fail(fmt::format("unexpected '{}': the innermost open block is the '{}' on line {}, closed by '{}'", tag,
                       inner.tag, inner.line, inner.closers.front()));
    } else {
      fail(fmt::format("unknown tag '{}'", tag));
    }
    open_.pop_back();
  }

  std::unique_ptr<IfNode> parse_if() {
    auto node = std::make_unique<IfNode>(line());
    next();
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const std::string tag = cur().text;
      next();
      if (tag == "elif") continue;
      if (tag == "else") node->otherwise = parse_statements({"endif"}, true);
      return node;
    }
  }

  std::unique_ptr<ForNode> parse_for() {
    auto node = std::make_unique<ForNode>(line());
    next();
    node->target = parse_assign_target(false, "in");
    expect_name_value("in");
    node->iterable = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    ++loop_depth_;
    node->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    const bool has_else = cur().text == "else";
    next();
    if (has_else) node->otherwise = parse_statements({"endfor"}, true);
    return node;
  }

  NodePtr parse_set() {
    const int at = line();
    next();
    AssignTarget target = parse_assign_target(true, nullptr);
    if (skip_op("=")) {
      auto node = std::make_unique<SetNode>(at);
      node->target = std::move(target);
      node->value = parse_tuple(false, true, {}, false);
      return node;
    }
    auto node = std::make_unique<SetBlockNode>(at);
    node->target = std::move(target);
    if (is_op("|")) node->filter = parse_filter(nullptr, false);
    node->body = parse_statements({"endset"}, true);
    return node;
  }

  void parse_signature(std::vector<std::string>& params, std::vector<ExprPtr>& defaults) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      params.push_back(expect_name());
      if (skip_op("=")) {
        defaults.push_back(parse_expression(true));
      } else if (!defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  NodePtr parse_macro() {
    auto node = std::make_unique<MacroNode>(line());
    next();
    node->name = expect_name();
    parse_signature(node->params, node->defaults);
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_statements({"endmacro"}, true);
    node->use = macro_use(node->body);
    loop_depth_ = saved_loops;
    return node;
  }

  NodePtr parse_call_block() {
    auto node = std::make_unique<CallBlockNode>(line());
    next();
    if (is_op("(")) parse_signature(node->params, node->defaults);
    node->call = parse_expression(true);
    if (node->call->kind != Expr::Kind::Call) fail("expected a macro call after 'call'");
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_statements({"endcall"}, true);
    node->use = macro_use(node->body);
    loop_depth_ = saved_loops;
    return node;
  }

  NodePtr parse_with() {
    auto node = std::make_unique<WithNode>(line());
    next();
    while (cur().type != TokenType::BlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      AssignTarget target = parse_assign_target(false, nullptr);
      expect_op("=");
      node->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    node->body = parse_statements({"endwith"}, true);
    return node;
  }

  // One name, `ns.attr` (set only) or several names separated by commas (unpacking), optionally in
  // parentheses; `end` is a name that also ends the list ("in" of a for loop).
  AssignTarget parse_assign_target(bool with_namespace, const char* end) {
    AssignTarget target;
    const bool parenthesized = skip_op("(");
    while (true) {
      if (!target.items.empty()) expect_op(",");
      if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")") || is_op("=") ||
          (end && is_name(end))) {
        break;
      }
      if (cur().type != TokenType::Name) fail(fmt::format("cannot assign to {}", describe(cur())));
      const std::string& name = cur().text;
      if (in(name, {"true", "false", "True", "False", "none", "None"}))
        fail(fmt::format("cannot assign to '{}'", name));
      AssignTarget::Item item{name, ""};
      next();
      if (with_namespace && is_op(".")) {
        next();
        item.attribute = expect_name();
      }
      target.items.push_back(std::move(item));
      if (!is_op(",")) break;
      target.unpack = true;
    }
    if (parenthesized) {
      expect_op(")");
      target.unpack = true;
    }
    if (target.items.empty()) fail(fmt::format("expected an assignment target, got {}", describe(cur())));
    return target;
  }

  // ---- expressions ----

  bool is_tuple_end(Tags extra_end) const {
    const Token& token = cur();
    if (token.type == TokenType::VariableEnd || token.type == TokenType::BlockEnd || is_op(")")) return true;
    return token.type == TokenType::Name && in(token.text, extra_end);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Tags extra_end, bool explicit_parentheses) {
    const int at = line();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items.front());
      if (!explicit_parentheses) fail(fmt::format("expected an expression, got {}", describe(cur())));
    }
    auto tuple = std::make_unique<ListExpr>(true, at);
    tuple->items = std::move(items);
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    const int at = line();
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      expr = std::make_unique<CondExpr>(std::move(test), std::move(expr), std::move(otherwise), at);
    }
    return expr;
  }

  ExprPtr parse_or() {
    const int at = line();
    ExprPtr left = parse_and();
    while (skip_name("or")) left = std::make_unique<BinaryExpr>(BinaryExpr::Op::Or, std::move(left), parse_and(), at);
    return left;
  }

  ExprPtr parse_and() {
    const int at = line();
    ExprPtr left = parse_not();
    while (skip_name("and")) left = std::make_unique<BinaryExpr>(BinaryExpr::Op::And, std::move(left), parse_not(), at);
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const int at = line();
      next();
      return std::make_unique<UnaryExpr>(UnaryExpr::Op::Not, parse_not(), at);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int at = line();
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> compare;
    while (true) {
      CompareExpr::Op op;
      if (is_op("==")) {
        op = CompareExpr::Op::Eq;
      } else if (is_op("!=")) {
        op = CompareExpr::Op::Ne;
      } else if (is_op("<")) {
        op = CompareExpr::Op::Lt;
      } else if (is_op("<=")) {
        op = CompareExpr::Op::Le;
      } else if (is_op(">")) {
        op = CompareExpr::Op::Gt;
      } else if (is_op(">=")) {
        op = CompareExpr::Op::Ge;
      } else if (is_name("in")) {
        op = CompareExpr::Op::In;
      } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
        next();
        op = CompareExpr::Op::NotIn;
      } else {
        break;
      }
      next();
      if (!compare) compare = std::make_unique<CompareExpr>(std::move(first), at);
      compare->rest.emplace_back(op, parse_math1());
    }
    if (compare) return compare;
    return first;
  }

  ExprPtr parse_math1() {
    const int at = line();
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const auto op = is_op("+") ? BinaryExpr::Op::Add : BinaryExpr::Op::Sub;
      next();
      left = std::make_unique<BinaryExpr>(op, std::move(left), parse_concat(), at);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int at = line();
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto concat = std::make_unique<ConcatExpr>(at);
    concat->parts.push_back(std::move(first));
    while (skip_op("~")) concat->parts.push_back(parse_math2());
    return concat;
  }

  ExprPtr parse_math2() {
    const int at = line();
    ExprPtr left = parse_pow();
    while (true) {
      BinaryExpr::Op op;
      if (is_op("*")) {
        op = BinaryExpr::Op::Mul;
      } else if (is_op("/")) {
        op = BinaryExpr::Op::Div;
      } else if (is_op("//")) {
        op = BinaryExpr::Op::FloorDiv;
      } else if (is_op("%")) {
        op = BinaryExpr::Op::Mod;
      } else {
        return left;
      }
      next();
      left = std::make_unique<BinaryExpr>(op, std::move(left), parse_pow(), at);
    }
  }

  ExprPtr parse_pow() {
    const int at = line();
    ExprPtr left = parse_unary(true);
    while (skip_op("**"))
      left = std::make_unique<BinaryExpr>(BinaryExpr::Op::Pow, std::move(left), parse_unary(true), at);
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const int at = line();
    ExprPtr node;
    if (skip_op("-")) {
      node = std::make_unique<UnaryExpr>(UnaryExpr::Op::Neg, parse_unary(false), at);
    } else if (skip_op("+")) {
      node = std::make_unique<UnaryExpr>(UnaryExpr::Op::Pos, parse_unary(false), at);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& token = cur();
    const int at = token.line;
    switch (token.type) {
      case TokenType::Name: {
        const std::string name = token.text;
        next();
        if (name == "true" || name == "True") return std::make_unique<ConstExpr>(Value::boolean(true), at);
        if (name == "false" || name == "False") return std::make_unique<ConstExpr>(Value::boolean(false), at);
        if (name == "none" || name == "None") return std::make_unique<ConstExpr>(Value::none(), at);
        return std::make_unique<NameExpr>(name, at);
      }
      case TokenType::String: {
        std::string text;
        while (cur().type == TokenType::String) {  // adjacent literals join, as in Python
          text += cur().text;
          next();
        }
        return std::make_unique<ConstExpr>(Value::string(std::move(text)), at);
      }
      case TokenType::Integer: {
        const int64_t value = token.integer;
        next();
        return std::make_unique<ConstExpr>(Value::integer(value), at);
      }
      case TokenType::Float: {
        const double value = token.number;
        next();
        return std::make_unique<ConstExpr>(Value::number(value), at);
      }
      case TokenType::Operator:
        if (token.text == "(") {
          next();
          ExprPtr inner = parse_tuple(false, true, {}, true);
          expect_op(")");
          return inner;
        }
        if (token.text == "[") return parse_list();
        if (token.text == "{") return parse_dict();
        break;
      default: break;
    }
    fail(fmt::format("unexpected {}", describe(token)));
  }

  ExprPtr parse_list() {
    auto list = std::make_unique<ListExpr>(false, line());
    expect_op("[");
    while (!is_op("]")) {
      if (!list->items.empty()) expect_op(",");
      if (is_op("]")) break;
      list->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return list;
  }

  ExprPtr parse_dict() {
    auto dict = std::make_unique<DictExpr>(line());
    expect_op("{");
    while (!is_op("}")) {
      if (!dict->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      dict->items.emplace_back(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int at = line();
    if (skip_op(".")) {
      if (cur().type == TokenType::Name) {
        std::string name = cur().text;
        next();
        return std::make_unique<GetattrExpr>(std::move(node), std::move(name), at);
      }
      if (cur().type != TokenType::Integer)
        fail(fmt::format("expected a name or number after '.', got {}", describe(cur())));
      auto index = std::make_unique<ConstExpr>(Value::integer(cur().integer), at);
      next();
      return std::make_unique<GetitemExpr>(std::move(node), std::move(index), at);
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr index;
    if (args.size() == 1) {
      index = std::move(args.front());
    } else {
      auto tuple = std::make_unique<ListExpr>(true, at);
      tuple->items = std::move(args);
      index = std::move(tuple);
    }
    return std::make_unique<GetitemExpr>(std::move(node), std::move(index), at);
  }

  ExprPtr parse_subscribed() {
    const int at = line();
    auto slice = std::make_unique<SliceExpr>(at);
    if (!skip_op(":")) {
      ExprPtr node = parse_expression(true);
      if (!skip_op(":")) return node;
      slice->start = std::move(node);
    }
    auto ends_part = [&] { return is_op(":") || is_op("]") || is_op(","); };
    if (!ends_part()) slice->stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) slice->step = parse_expression(true);
    }
    return slice;
  }

  void parse_call_args(Arguments& args) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail("calls with *args or **kwargs are not supported");
      if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
        std::string key = cur().text;
        next();
        next();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!args.keyword.empty()) fail("a positional argument follows a keyword argument");
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(std::move(callee), line());
    parse_call_args(call->args);
    return call;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const int at = line();
      const std::string name = dotted_name();
      auto filter = std::make_unique<FilterExpr>(std::move(node), name, find_filter(name), at);
      if (is_op("(")) parse_call_args(filter->args);
      node = std::move(filter);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int at = line();
    next();  // is
    const bool negated = skip_name("not");
    const std::string name = dotted_name();
    auto test = std::make_unique<TestExpr>(std::move(node), name, find_test(name), at);
    const Token& token = cur();
    const bool starts_argument = token.type == TokenType::Name || token.type == TokenType::String ||
                                 token.type == TokenType::Integer || token.type == TokenType::Float || is_op("(") ||
                                 is_op("[") || is_op("{");
    if (is_op("(")) {
      parse_call_args(test->args);
    } else if (starts_argument && !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("tests cannot be chained with 'is'");
      test->args.positional.push_back(parse_postfix(parse_primary()));
    }
    if (negated) return std::make_unique<UnaryExpr>(UnaryExpr::Op::Not, std::move(test), at);
    return test;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<OpenBlock> open_;
};

// Every expression of a body, with whether it sits where jinja2 compiles in a "soft" frame: an if
// statement's test or body (not inside a loop, macro or block within it), or an inline if-expression.
class AstWalker {
 public:
  using Visit = std::function<void(const Expr&, bool soft)>;
  explicit AstWalker(Visit visit) : visit_(std::move(visit)) {}

  void body(const Body& nodes, bool soft) {
    for (const NodePtr& node : nodes) statement(*node, soft);
  }

 private:
  void statement(const Node& node, bool soft) {
    switch (node.kind) {
      case Node::Kind::Output: expr(static_cast<const OutputNode&>(node).expr.get(), soft); break;
      case Node::Kind::If:
        for (const auto& [test, branch] : static_cast<const IfNode&>(node).branches) {
          expr(test.get(), true);
          body(branch, true);
        }
        body(static_cast<const IfNode&>(node).otherwise, true);
        break;
      case Node::Kind::For: {
        const auto& n = static_cast<const ForNode&>(node);
        expr(n.iterable.get(), soft);
        expr(n.filter.get(), false);
        body(n.body, false);
        body(n.otherwise, false);
        break;
      }
      case Node::Kind::Set: expr(static_cast<const SetNode&>(node).value.get(), soft); break;
      case Node::Kind::SetBlock:
        expr(static_cast<const SetBlockNode&>(node).filter.get(), false);
        body(static_cast<const SetBlockNode&>(node).body, false);
        break;
      case Node::Kind::Macro: {
        const auto& n = static_cast<const MacroNode&>(node);
        for (const ExprPtr& d : n.defaults) expr(d.get(), false);
        body(n.body, false);
        break;
      }
      case Node::Kind::CallBlock: {
        const auto& n = static_cast<const CallBlockNode&>(node);
        expr(n.call.get(), soft);
        for (const ExprPtr& d : n.defaults) expr(d.get(), false);
        body(n.body, false);
        break;
      }
      case Node::Kind::FilterBlock:
        expr(static_cast<const FilterBlockNode&>(node).filter.get(), false);
        body(static_cast<const FilterBlockNode&>(node).body, false);
        break;
      case Node::Kind::With:
        for (const auto& [target, value] : static_cast<const WithNode&>(node).assignments) expr(value.get(), soft);
        body(static_cast<const WithNode&>(node).body, false);
        break;
      case Node::Kind::Scope: body(static_cast<const ScopeNode&>(node).body, false); break;
      default: break;
    }
  }

  void args(const Arguments& a, bool soft) {
    for (const ExprPtr& e : a.positional) expr(e.get(), soft);
    for (const auto& [key, e] : a.keyword) expr(e.get(), soft);
  }

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    visit_(*e, soft);
    switch (e->kind) {
      case Expr::Kind::List:
        for (const ExprPtr& item : static_cast<const ListExpr*>(e)->items) expr(item.get(), soft);
        break;
      case Expr::Kind::Dict:
        for (const auto& [key, value] : static_cast<const DictExpr*>(e)->items) {
          expr(key.get(), soft);
          expr(value.get(), soft);
        }
        break;
      case Expr::Kind::Getattr: expr(static_cast<const GetattrExpr*>(e)->object.get(), soft); break;
      case Expr::Kind::Getitem:
        expr(static_cast<const GetitemExpr*>(e)->object.get(), soft);
        expr(static_cast<const GetitemExpr*>(e)->index.get(), soft);
        break;
      case Expr::Kind::Slice: {
        const auto* s = static_cast<const SliceExpr*>(e);
        expr(s->start.get(), soft);
        expr(s->stop.get(), soft);
        expr(s->step.get(), soft);
        break;
      }
      case Expr::Kind::Call:
        expr(static_cast<const CallExpr*>(e)->callee.get(), soft);
        args(static_cast<const CallExpr*>(e)->args, soft);
        break;
      case Expr::Kind::Filter:
        expr(static_cast<const FilterExpr*>(e)->operand.get(), soft);
        args(static_cast<const FilterExpr*>(e)->args, soft);
        break;
      case Expr::Kind::Test:
        expr(static_cast<const TestExpr*>(e)->operand.get(), soft);
        args(static_cast<const TestExpr*>(e)->args, soft);
        break;
      case Expr::Kind::Unary: expr(static_cast<const UnaryExpr*>(e)->operand.get(), soft); break;
      case Expr::Kind::Binary:
        expr(static_cast<const BinaryExpr*>(e)->left.get(), soft);
        expr(static_cast<const BinaryExpr*>(e)->right.get(), soft);
        break;
      case Expr::Kind::Concat:
        for (const ExprPtr& part : static_cast<const ConcatExpr*>(e)->parts) expr(part.get(), soft);
        break;
      case Expr::Kind::Compare:
        expr(static_cast<const CompareExpr*>(e)->first.get(), soft);
        for (const auto& [op, operand] : static_cast<const CompareExpr*>(e)->rest) expr(operand.get(), soft);
        break;
      case Expr::Kind::Cond: {
        const auto* c = static_cast<const CondExpr*>(e);
        expr(c->test.get(), true);
        expr(c->then.get(), true);
        expr(c->otherwise.get(), true);
        break;
      }
      default: break;
    }
  }

  Visit visit_;
};

// Which of caller, kwargs and varargs a macro's body reads: jinja2 passes them only then, and refuses
// extra arguments the macro does not catch.
MacroUse macro_use(const Body& body) {
  MacroUse use;
  AstWalker([&](const Expr& e, bool) {
    if (e.kind != Expr::Kind::Name) return;
    const std::string& name = static_cast<const NameExpr&>(e).name;
    use.caller = use.caller || name == "caller";
    use.kwargs = use.kwargs || name == "kwargs";
    use.varargs = use.varargs || name == "varargs";
  }).body(body, false);
  return use;
}

}  // namespace

// jinja2 refuses an unknown filter or test when it compiles the template, except in a soft frame (see
// AstWalker): there the error waits until the filter is called ("No filter named 'x' found."), so a
// template may guard a filter it is not sure of.
Program parse_template(const std::string& source) {
  Program program = Parser(tokenize(source)).parse();
  AstWalker([](const Expr& e, bool soft) {
    if (soft) return;
    if (e.kind == Expr::Kind::Filter && !static_cast<const FilterExpr&>(e).fn) {
      throw TemplateError(fmt::format("no filter named '{}'", static_cast<const FilterExpr&>(e).name), e.line);
    }
    if (e.kind == Expr::Kind::Test && !static_cast<const TestExpr&>(e).fn) {
      throw TemplateError(fmt::format("no test named '{}'", static_cast<const TestExpr&>(e).name), e.line);
    }
  }).body(program.body, false);
  return program;
}

}  // namespace kvc::jinja
