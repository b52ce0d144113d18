#include "util/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace kvc {

std::string read_text_file(const std::string& path) {
  KVC_CHECK(file_exists(path), "file not found: '{}'", path);
  KVC_CHECK(!is_directory(path), "'{}' is a folder, expected a file", path);
  std::ifstream in(path, std::ios::binary);
  KVC_CHECK(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  KVC_CHECK(f != nullptr, "cannot write '{}': {}", tmp, std::strerror(errno));
  const bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size() &&
                  std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot write '{}': {}", path, std::strerror(errno));
  }
}

}  // namespace kvc
