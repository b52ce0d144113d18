#pragma once
// Python's str semantics over UTF-8 bytes. Chat templates are Jinja, and Jinja evaluates them with
// Python strings: lengths, indices and slices count code points, strip() and split() know Unicode
// whitespace, and repr()/str() of numbers and containers have Python's exact spelling. Every function
// here reproduces what the same call does in CPython, so a rendering matches transformers byte for byte.
// A byte that is not part of well-formed UTF-8 counts as one character and is kept as it is.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvc::py {

// Code points with their byte offsets: offsets[i] is where character i starts; offsets.back() == size.
struct CodePoints {
  std::vector<uint32_t> chars;
  std::vector<size_t> offsets;
};
CodePoints code_points(std::string_view text);
size_t length(std::string_view text);  // in code points

bool is_space(uint32_t c);       // str.isspace()
bool is_line_break(uint32_t c);  // what str.splitlines() splits at
bool is_printable(uint32_t c);   // str.isprintable(), which repr() uses to decide on escapes

// str.isalpha(), isdigit(), ... : false for the empty string, as in Python.
enum class CharTest { Alpha, Digit, Decimal, Numeric, Alnum, Space, Upper, Lower };
bool str_is(std::string_view text, CharTest test);

std::string upper(std::string_view text);
std::string lower(std::string_view text);
std::string title(std::string_view text);       // str.title()
std::string capitalize(std::string_view text);  // str.capitalize()

// str.strip(chars) / lstrip / rstrip; no chars strips whitespace.
std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; no separator splits at runs of whitespace. An empty
// separator is the caller's error (Python raises).
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view text, bool keepends);
// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between characters.
std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);
// str.count(sub): non-overlapping occurrences; an empty sub counts the len + 1 gaps.
int64_t count(std::string_view text, std::string_view sub);

std::string repr(std::string_view text);  // 'it' / "it's", with Python's escapes
std::string float_repr(double value);     // repr(float): 0.1, 1e+16, 1.0, inf, nan
std::string int_str(int64_t value);

}  // namespace kvc::py
