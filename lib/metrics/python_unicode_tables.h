#pragma once
// Code point tables read from Python's unicodedata by scripts/make_python_unicode_tables.py. Use them
// through metrics/python_unicode.h.
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace kvc::python_unicode {

struct CodeRange {
  char32_t first, last;  // inclusive
};

// Every stride-th code point from `first` to `last` lowers to itself + delta.
struct LowerRun {
  char32_t first, last;
  int32_t delta;
  uint32_t stride;
};

template <typename Row>
struct Table {
  const Row* rows;
  size_t size;
  const Row* begin() const { return rows; }
  const Row* end() const { return rows + size; }
};

// Sorted, disjoint ranges.
Table<CodeRange> word_chars();           // re \w: str.isalnum() or '_'
Table<CodeRange> decimal_digits();       // re \d: str.isdecimal()
Table<CodeRange> spaces();               // str.isspace()
Table<CodeRange> cased_not_ignorable();  // cased and not case-ignorable (final sigma)
Table<CodeRange> case_ignorable();       // case-ignorable (final sigma)
Table<LowerRun> lower_runs();            // str.lower() where it maps one code point to one
const char* unicode_version();

}  // namespace kvc::python_unicode
