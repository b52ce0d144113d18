#pragma once
// The parts of Python's str and re that LongBench's scorer relies on, over code points, with the tables
// of the Python the goldens were made with (python_unicode_tables.cpp), so that accents, CJK, full-width
// digits or Unicode spaces are treated exactly as the official scorer treats them.
#include <string>

namespace kvc::python_unicode {

bool is_space(char32_t c);      // str.isspace(): what str.split() splits at
bool is_word_char(char32_t c);  // re \w (str.isalnum() or '_'): what \b looks at
bool is_decimal(char32_t c);    // re \d (str.isdecimal()): "１２" and "١٢" are numbers too

// str.lower(): one-to-one mappings from the table, U+0130 (İ) to "i̇", and capital sigma to final ς at
// the end of a word (after a cased letter and not before one, case-ignorable characters skipped).
std::u32string lower(const std::u32string& text);

}  // namespace kvc::python_unicode
