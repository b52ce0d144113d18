#pragma once
#include <map>
#include <string>

namespace kvc {

// Replaces every "{name}" whose name is a key of `values` by its value; other braces stay as they are.
// One pass, so braces inside a substituted value (source code, a story) are never expanded.
std::string fill_placeholders(const std::string& text, const std::map<std::string, std::string>& values);

}  // namespace kvc
