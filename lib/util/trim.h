#pragma once
// `text` without the leading and trailing characters of `chars`.
#include <string>

namespace kvc {

inline std::string trim(const std::string& text, const char* chars) {
  const size_t begin = text.find_first_not_of(chars);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(chars) - begin + 1);
}

}  // namespace kvc
