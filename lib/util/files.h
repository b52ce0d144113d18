#pragma once
#include <string>

namespace kvc {

// Whole file as bytes; throws kvc::Error naming the path if it is missing or unreadable.
std::string read_text_file(const std::string& path);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// Writes via a temporary file in the same folder and rename(), so readers never see half a file.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace kvc
