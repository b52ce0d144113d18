#pragma once
// Splits Jinja source into tokens the way jinja2's lexer does under transformers' settings
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False): text between tags, with the
// whitespace control of `{%- -%}`, `{{- -}}`, `{%+ +%}` and the two block options already applied, then
// the tokens inside each tag. Comments disappear here and {% raw %} bodies become plain text.
#include <cstdint>
#include <string>
#include <vector>

namespace kvc::jinja {

enum class TokenType {
  Text,
  VariableBegin,
  VariableEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Operator,
  End
};

struct Token {
  TokenType type;
  std::string text;  // the text, name, decoded string literal or operator
  int64_t integer = 0;
  double number = 0.0;
  int line = 1;
};

// Throws TemplateError (with its line) for an unclosed tag, comment or string, an unexpected character
// or a bracket that does not match.
std::vector<Token> tokenize(const std::string& source);

// How a token reads in an error message: "'endfor'", "end of template", "'}}'".
std::string describe(const Token& token);

}  // namespace kvc::jinja
