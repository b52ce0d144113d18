#include "tokenizer/special_token_flags.h"

#include <algorithm>

#include "util/error.h"
#include "util/files.h"
#include "util/json_file.h"

namespace kvc {

AddSpecialFlags read_add_special_flags(const std::string& dir) {
  AddSpecialFlags flags;
  const std::string path = dir + "/tokenizer_config.json";
  if (!file_exists(path)) return flags;
  const nlohmann::json config = read_json_object(path);
  const auto flag = [&](const char* key) -> std::optional<bool> {
    if (!config.is_object() || !config.contains(key) || !config[key].is_boolean()) return std::nullopt;
    return config[key].get<bool>();
  };
  flags.add_bos = flag("add_bos_token");
  flags.add_eos = flag("add_eos_token");
  return flags;
}

namespace {

void set_member(std::vector<int>& ids, std::optional<int> id, bool wanted, bool at_front, const char* flag,
                const std::string& where) {
  const bool present = id && std::find(ids.begin(), ids.end(), *id) != ids.end();
  if (wanted && !present) {
    KVC_CHECK(id.has_value(), "'{}': {} is true but the tokenizer has no such token", where, flag);
    ids.insert(at_front ? ids.begin() : ids.end(), *id);
  } else if (!wanted && present) {
    ids.erase(std::remove(ids.begin(), ids.end(), *id), ids.end());
  }
}

}  // namespace

void apply_add_special_flags(const AddSpecialFlags& flags, std::optional<int> bos, std::optional<int> eos,
                             std::vector<int>& prefix, std::vector<int>& suffix, const std::string& where) {
  if (flags.add_bos) set_member(prefix, bos, *flags.add_bos, true, "add_bos_token", where);
  if (flags.add_eos) set_member(suffix, eos, *flags.add_eos, false, "add_eos_token", where);
}

}  // namespace kvc
