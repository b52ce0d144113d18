#pragma once
// JSON documents read with errors that name their source.
#include <string>

#include <nlohmann/json.hpp>

namespace kvc {

// Parses `text`; throws kvc::Error naming `source` when it is not valid JSON or not an object.
nlohmann::json parse_json_object(const std::string& text, const std::string& source);
// Same for the whole file at `path`.
nlohmann::json read_json_object(const std::string& path);

}  // namespace kvc
