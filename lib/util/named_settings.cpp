#include "util/named_settings.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

namespace kvc {

std::string named_settings_text(const NamedSettings& settings) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [name, value] : settings) pairs.push_back({name, value});
  return pairs.dump();
}

NamedSettings parse_named_settings(const std::string& text) {
  const nlohmann::json pairs = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  NamedSettings settings;
  if (!pairs.is_array()) return {};
  for (const auto& p : pairs) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string()) return {};
    settings.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return settings;
}

std::string settings_differences(const NamedSettings& stored, const NamedSettings& now) {
  const std::map<std::string, std::string> before(stored.begin(), stored.end()), after(now.begin(), now.end());
  std::string out;
  const auto shown = [](const std::string& v) { return v.empty() ? std::string("\"\"") : v; };
  const auto add = [&](const std::string& name, const std::string& was, const std::string& is) {
    out += fmt::format("{}{} {} (this run: {})", out.empty() ? "" : ", ", name, shown(was), shown(is));
  };
  for (const auto& [name, value] : stored) {
    const auto it = after.find(name);
    if (it == after.end()) add(name, value, "not set");
    else if (it->second != value) add(name, value, it->second);
  }
  for (const auto& [name, value] : now)
    if (before.count(name) == 0) add(name, "not set", value);
  return out;
}

}  // namespace kvc
