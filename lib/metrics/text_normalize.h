#pragma once
// Text normalisation shared by the answer metrics, following Python's str semantics where LongBench
// relies on them (str.lower, str.split, the regex \b).
#include <string>
#include <vector>

namespace kvc {

// Python's str.split() with no argument: runs of Unicode whitespace separate tokens, none are empty.
std::vector<std::string> split_whitespace(const std::string& text);

// Python's str.lower() over all of Unicode (python_unicode::lower).
std::string to_lower(const std::string& text);

// LongBench's normalize_answer: lower-case, drop ASCII punctuation, drop the articles a/an/the as whole
// words, collapse whitespace to single spaces.
std::string normalize_answer(const std::string& text);

}  // namespace kvc
