#pragma once
// Content hashes recorded in artifact metadata, so an artifact made for one model or data set is
// recognised as foreign elsewhere. FNV-1a 64 is enough: the threat is mix-ups, not adversaries.
#include <cstdint>
#include <string>
#include <vector>

namespace kvc {

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ULL);
std::string hex64(uint64_t value);
// Hash of a whole file's bytes, as 16 hex digits; throws kvc::Error if it cannot be read.
std::string hash_file(const std::string& path);
// Hash of several files in order (e.g. calibration data sets).
std::string hash_files(const std::vector<std::string>& paths);
std::string hash_string(const std::string& text);

}  // namespace kvc
