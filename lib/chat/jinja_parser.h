#pragma once
// Jinja source to a Program, following jinja2's grammar (jinja2/parser.py) for the statements chat
// templates use: if/elif/else, for (with else, an `if` filter and break/continue), set (names, tuples,
// namespace attributes, blocks), macro, call, filter, with, raw and transformers' generation tag.
// Unknown filters and tests are refused here, as jinja2 refuses them when it compiles.
#include <string>

#include "chat/jinja_ast.h"

namespace kvc::jinja {

// Throws TemplateError with the line at fault.
Program parse_template(const std::string& source);

}  // namespace kvc::jinja
