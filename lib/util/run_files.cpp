#include "util/run_files.h"

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "util/error.h"
#include "util/files.h"

namespace kvc {
namespace {

using FileId = std::pair<dev_t, ino_t>;

struct Input {
  std::string path, role;
  bool named = false;  // noted by name: an input for the whole run
  int mappings = 0;    // mapped now
};

struct RunFiles {
  std::mutex mutex;
  std::map<FileId, Input> inputs;
  std::set<FileId> output_ids;
  std::set<std::string> output_paths;  // absolute, for outputs that do not exist yet
};

RunFiles& run_files() {
  // Never destroyed: a mapping held by another static (a model cached for the life of the process) is
  // released during static destruction, after a function-local static here would already be gone.
  static RunFiles* files = new RunFiles;
  return *files;
}

// stat() follows symlinks, so a link and its target are one file.
bool regular_file_id(const std::string& path, FileId& id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  id = {st.st_dev, st.st_ino};
  return true;
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
  return ec ? std::filesystem::absolute(path, ec).lexically_normal().string() : resolved.string();
}

void check_against_inputs(RunFiles& files, const std::string& path) {
  FileId id;
  if (!regular_file_id(path, id)) return;
  const auto input = files.inputs.find(id);
  if (input == files.inputs.end() || (!input->second.named && input->second.mappings == 0)) return;
  const std::string& input_path = input->second.path;
  const std::string& role = input->second.role;
  if (input_path == path) fail("refusing to write '{}': it is {}; give another output path", path, role);
  fail("refusing to write '{}': it is the same file as '{}', {}; give another output path", path, input_path, role);
}

}  // namespace

void note_input_file(const std::string& path, const std::string& role) {
  FileId id;
  if (!regular_file_id(path, id)) return;
  RunFiles& files = run_files();
  std::lock_guard<std::mutex> lock(files.mutex);
  Input& input = files.inputs[id];
  if (!input.named) input.path = path, input.role = role;  // the first name given stays
  input.named = true;
}

void note_mapped_input(const std::string& path, unsigned long device, unsigned long inode) {
  RunFiles& files = run_files();
  std::lock_guard<std::mutex> lock(files.mutex);
  Input& input = files.inputs[{static_cast<dev_t>(device), static_cast<ino_t>(inode)}];
  if (!input.named && input.mappings == 0) input.path = path, input.role = "a file this run is reading";
  ++input.mappings;
}

void release_mapped_input(unsigned long device, unsigned long inode) {
  RunFiles& files = run_files();
  std::lock_guard<std::mutex> lock(files.mutex);
  const auto input = files.inputs.find({static_cast<dev_t>(device), static_cast<ino_t>(inode)});
  if (input != files.inputs.end() && input->second.mappings > 0) --input->second.mappings;
}

void note_model_files(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) {
    note_input_file(model_path, "the model");
    return;
  }
  // What the loader may read: config, weights and their index, tokenizer files, chat template.
  static const std::set<std::string> kModelFiles = {
      "config.json",           "generation_config.json",      "tokenizer.json",      "tokenizer.model",
      "tokenizer_config.json", "special_tokens_map.json",     "chat_template.jinja", "chat_template.json",
      "model.safetensors",     "model.safetensors.index.json"};
  for (const auto& entry : fs::directory_iterator(model_path, ec)) {
    const std::string name = entry.path().filename().string();
    const bool shard = name.rfind("model-", 0) == 0 && entry.path().extension() == ".safetensors";
    if (kModelFiles.count(name) > 0 || shard || entry.path().extension() == ".gguf")
      note_input_file(entry.path().string(), "a file of the model '" + model_path + "'");
  }
}

void check_output_is_not_an_input(const std::string& path) {
  RunFiles& files = run_files();
  std::lock_guard<std::mutex> lock(files.mutex);
  check_against_inputs(files, path);
}

void claim_output(const std::string& path) {
  if (path == "-") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;  // written through, or refused later
  RunFiles& files = run_files();
  std::lock_guard<std::mutex> lock(files.mutex);
  check_against_inputs(files, path);
  FileId id;
  const bool exists = regular_file_id(path, id);
  const std::string absolute = absolute_path(path);
  const bool again = (exists && files.output_ids.count(id) > 0) || files.output_paths.count(absolute) > 0;
  KVC_CHECK(!again, "refusing to write '{}' twice: two outputs of this run name the same file; give each its own path",
            path);
  if (exists) files.output_ids.insert(id);
  files.output_paths.insert(absolute);
}

void claim_writable_output(const std::string& path) {
  claim_output(path);
  check_writable_output(path);
}

void forget_run_files() {
  RunFiles& files = run_files();
  std::lock_guard<std::mutex> lock(files.mutex);
  files.inputs.clear();
  files.output_ids.clear();
  files.output_paths.clear();
}

}  // namespace kvc
