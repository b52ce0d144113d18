#include "harness_options.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "eval_common.h"
#include "util/checked_number.h"
#include "util/hash.h"

namespace kvc::eval_app {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    std::string item = text.substr(begin, comma - begin);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    begin = comma + 1;
  }
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  for (const auto& item : split_list(text)) {
    const auto v = parse_integer(item);
    KVC_CHECK(v && *v > 0, "{}: '{}' is not a positive integer (expected e.g. 256,512)", flag, item);
    out.push_back(*v);
  }
  KVC_CHECK(!out.empty(), "{}: empty list", flag);
  return out;
}

std::vector<double> parse_double_list(const std::string& text, const std::string& flag) {
  std::vector<double> out;
  for (const auto& item : split_list(text)) {
    const auto v = parse_finite_number(item);
    KVC_CHECK(v.has_value(), "{}: '{}' is not a number (expected e.g. 0,0.5,1)", flag, item);
    out.push_back(*v);
  }
  KVC_CHECK(!out.empty(), "{}: empty list", flag);
  return out;
}

std::vector<std::string> haystack_files(const std::string& path) {
  KVC_CHECK(file_exists(path) || is_directory(path),
            "--haystack: '{}' not found (pass a text file or a folder of .txt)", path);
  if (!is_directory(path)) return {path};
  std::vector<std::string> files;
  if (DIR* dir = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0) files.push_back(path + "/" + name);
    }
    ::closedir(dir);
  }
  std::sort(files.begin(), files.end());
  KVC_CHECK(!files.empty(), "--haystack: folder '{}' has no .txt files", path);
  return files;
}

void ensure_out_dir(const std::string& dir) {
  KVC_CHECK(!dir.empty(), "--out-dir: empty folder name");
  KVC_CHECK(dir != "-", "--out-dir - : the results are several files; give a folder name (--json prints to stdout)");
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      partial = dir.substr(0, i);
      if (!partial.empty() && !is_directory(partial)) {
        KVC_CHECK(::mkdir(partial.c_str(), 0755) == 0 || errno == EEXIST, "--out-dir: cannot create '{}': {}", partial,
                  std::strerror(errno));
      }
    }
  }
  KVC_CHECK(is_directory(dir), "--out-dir: '{}' is not a folder", dir);
}

std::string prompt_format_key(const HarnessOptions& harness, const cli::ModelOptions& model) {
  std::string key;
  if (harness.chat) key += fmt::format("|chat {}|{}", harness.chat_template, hash_string(harness.system));
  if (model.bos != BosChoice::FromFile) key += model.bos == BosChoice::Add ? "|bos" : "|no-bos";
  return key;
}

nlohmann::json harness_metadata(const cli::ModelOptions& model_options, const LlamaModel& model,
                                const std::vector<std::string>& data_files, const std::string& method,
                                const HarnessOptions& harness, double wall_seconds) {
  nlohmann::json m = run_metadata(model_options, model, "");
  m["data"] = data_files.size() == 1 ? nlohmann::json(data_files.front()) : nlohmann::json(data_files);
  m["data_hash"] = data_files.empty() ? "" : hash_files(data_files);
  m["method"] = method;
  m["query_mode"] = harness.query;
  m["truncate"] = harness.truncate;
  m["seed"] = harness.seed;
  m["chat"] = harness.chat;
  if (harness.chat) {
    m["chat_template"] = harness.chat_template.empty() ? "the model's" : harness.chat_template;
    m["system"] = harness.system;
  }
  m["wall_seconds"] = wall_seconds;
  return m;
}

}  // namespace kvc::eval_app
