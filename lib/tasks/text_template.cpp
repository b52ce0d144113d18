#include "tasks/text_template.h"

namespace kvc {

std::string fill_placeholders(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('{', i);
    if (open == std::string::npos) break;
    out.append(text, i, open - i);
    const size_t close = text.find('}', open + 1);
    const auto value = close == std::string::npos ? values.end() : values.find(text.substr(open + 1, close - open - 1));
    if (value == values.end()) {
      out.push_back('{');
      i = open + 1;
    } else {
      out += value->second;
      i = close + 1;
    }
  }
  out.append(text, i, std::string::npos);
  return out;
}

}  // namespace kvc
