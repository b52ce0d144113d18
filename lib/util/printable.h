#pragma once
// Text for a terminal: a user's string inside an error (a path, a flag value) may hold control
// characters — an escape sequence that recolours or clears the screen, a carriage return that hides
// the start of the line, a newline that splits a one-line error. They are printed as C escapes
// (\n, \t, \r, \x1b ...); every other byte, UTF-8 included, is kept.
#include <string>

namespace kvc {

std::string printable(const std::string& text);

}  // namespace kvc
