#pragma once
// Line-by-line reading of a whole text, as JSON Lines files are read.
#include <string>

namespace kvc {

// Calls visit(line, number) for each line of `text`, numbered from 1, without its "\n" or "\r\n".
template <typename Visit>
void for_each_line(const std::string& text, Visit&& visit) {
  size_t number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    visit(line, ++number);
  }
}

}  // namespace kvc
