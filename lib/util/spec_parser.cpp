#include "util/spec_parser.h"

#include <algorithm>

#include "util/error.h"

namespace kvc {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

SpecParams parse_spec_params(const std::string& list, const std::string& flag, const std::string& spec) {
  KVC_CHECK(!trim(list).empty(), "{} '{}': empty parameter list after ':'; drop the ':' or add key=value items", flag,
            spec);
  SpecParams params;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = trim(list.substr(start, comma - start));
    KVC_CHECK(!item.empty(), "{} '{}': empty item between commas", flag, spec);
    const size_t eq = item.find('=');
    KVC_CHECK(eq != std::string::npos && eq > 0, "{} '{}': expected key=value, got '{}'", flag, spec, item);
    const std::string key = trim(item.substr(0, eq));
    for (const auto& [seen, value] : params) {
      KVC_CHECK(seen != key, "{} '{}': key '{}' is given twice; keep one", flag, spec, key);
    }
    params.emplace_back(key, trim(item.substr(eq + 1)));
    start = comma + 1;
  }
  return params;
}

NamedSpec parse_named_spec(const std::string& text, const std::string& flag) {
  NamedSpec spec;
  const size_t colon = text.find(':');
  spec.name = trim(text.substr(0, colon));
  if (colon != std::string::npos) spec.params = parse_spec_params(text.substr(colon + 1), flag, text);
  return spec;
}

}  // namespace kvc
