#pragma once
// Numbers typed by users or read from metadata: the whole text must be the number (no trailing
// characters, no overflow, for doubles no NaN or infinity). Callers word the error, since they know
// which flag or field the text came from.
#include <cstdint>
#include <optional>
#include <string>

namespace kvc {

std::optional<int64_t> parse_integer(const std::string& text);
std::optional<double> parse_finite_number(const std::string& text);

}  // namespace kvc
