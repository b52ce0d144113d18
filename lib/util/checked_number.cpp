#include "util/checked_number.h"

#include <cmath>
#include <exception>

namespace kvc {

std::optional<int64_t> parse_integer(const std::string& text) {
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return static_cast<int64_t>(value);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<double> parse_finite_number(const std::string& text) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace kvc
