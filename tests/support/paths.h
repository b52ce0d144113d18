#pragma once
#include <string>

namespace kvc::test {

inline std::string shared_dir() { return KVC_SHARED_DIR; }
inline std::string model_dir(const std::string& name) { return shared_dir() + "/models/" + name; }
inline std::string reference_dir(const std::string& name) { return shared_dir() + "/reference/" + name; }
inline std::string data_file(const std::string& rel) { return shared_dir() + "/data/" + rel; }
inline std::string bin(const std::string& tool) { return std::string(KVC_BIN_DIR) + "/" + tool; }

}  // namespace kvc::test
