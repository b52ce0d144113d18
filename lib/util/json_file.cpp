#include "util/json_file.h"

#include "util/error.h"
#include "util/files.h"

namespace kvc {

nlohmann::json parse_json_object(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not valid JSON: {}", source, e.what());
  }
  KVC_CHECK(j.is_object(), "'{}': expected a JSON object", source);
  return j;
}

nlohmann::json read_json_object(const std::string& path) { return parse_json_object(read_text_file(path), path); }

}  // namespace kvc
