#include "token_ids.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <climits>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace kvc::cli {

std::vector<int> parse_token_ids(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("--decode: the ids are not valid JSON: {}", e.what());
    }
    KVC_CHECK(object.contains("ids") && object["ids"].is_array(), "--decode: the JSON has no \"ids\" array");
    std::vector<int> ids;
    for (const auto& id : object["ids"]) {
      KVC_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT_MAX,
                "--decode: {} in \"ids\" is not a token id", id.dump());
      ids.push_back(id.get<int>());
    }
    return ids;
  }
  std::vector<int> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == '[' || c == ']') {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    const bool separated = end < text.size() ? (std::isspace(static_cast<unsigned char>(text[end])) ||
                                                text[end] == ',' || text[end] == ']')
                                             : true;
    if (end == pos || !separated || end - pos > 9) {
      size_t word_end = pos;
      while (word_end < text.size() && !std::isspace(static_cast<unsigned char>(text[word_end])) &&
             text[word_end] != ',')
        ++word_end;
      fail("--decode: '{}' is not a token id (expected ids such as \"1 2 3\")", text.substr(pos, word_end - pos));
    }
    ids.push_back(std::stoi(text.substr(pos, end - pos)));
    pos = end;
  }
  return ids;
}

std::string format_ids_plain(const std::vector<int>& ids) { return fmt::format("{}", fmt::join(ids, " ")); }

std::string format_ids_json(const std::vector<int>& ids) {
  return fmt::format("{{\"ids\": [{}]}}", fmt::join(ids, ", "));
}

}  // namespace kvc::cli
