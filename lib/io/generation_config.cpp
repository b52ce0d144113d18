#include "io/generation_config.h"

#include <cstdint>

#include "util/error.h"
#include "util/json_file.h"

namespace kvc {

namespace {

int token_id(const nlohmann::json& value, const std::string& path, const char* field) {
  KVC_CHECK(value.is_number_integer(), "'{}': '{}' is not an integer", path, field);
  const int64_t id = value.get<int64_t>();
  KVC_CHECK(id >= 0 && id <= INT32_MAX, "'{}': '{}' = {} is not a token id", path, field, id);
  return static_cast<int>(id);
}

}  // namespace

GenerationConfig read_generation_config(const std::string& path) {
  const nlohmann::json j = read_json_object(path);
  GenerationConfig config;
  if (j.contains("bos_token_id") && !j["bos_token_id"].is_null())
    config.bos_id = token_id(j["bos_token_id"], path, "bos_token_id");
  if (j.contains("eos_token_id")) {
    const nlohmann::json& e = j["eos_token_id"];
    if (e.is_array()) {
      for (const nlohmann::json& id : e) config.eos_ids.push_back(token_id(id, path, "eos_token_id"));
    } else if (!e.is_null()) {
      config.eos_ids.push_back(token_id(e, path, "eos_token_id"));
    }
  }
  return config;
}

}  // namespace kvc
