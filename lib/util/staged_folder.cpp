#include "util/staged_folder.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "util/error.h"

namespace kvc {
namespace {

constexpr const char* kPrefix = ".staging.";

// The regular files directly inside `folder` (a staging folder holds nothing else that kvc wrote).
std::vector<std::string> files_in(const std::string& folder) {
  std::vector<std::string> names;
  DIR* d = ::opendir(folder.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::lstat((folder + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(name);
  }
  ::closedir(d);
  return names;
}

// Removes the files a staging folder holds, then the folder; stops short (leaving it) at anything else.
void remove_staging(const std::string& folder) {
  for (const std::string& name : files_in(folder)) ::unlink((folder + "/" + name).c_str());
  ::rmdir(folder.c_str());
}

// `.staging.<pid>.<n>` folders of processes that no longer run, owned by this user.
void remove_stale_stagings(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::strlen(kPrefix));
    const size_t dot = rest.find('.');
    const std::string digits = rest.substr(0, dot);
    if (dot == std::string::npos || digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) stale.push_back(path);
  }
  ::closedir(d);
  for (const std::string& path : stale) remove_staging(path);
}

}  // namespace

StagedFolder::StagedFolder(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    KVC_CHECK(!ec, "cannot make folder '{}': {}", dir_, ec.message());
    made_dir_ = true;
  }
  KVC_CHECK(fs::is_directory(dir_, ec), "'{}' is not a folder", dir_);
  remove_stale_stagings(dir_);
  static std::atomic<unsigned> counter{0};
  staging_ = dir_ + "/" + kPrefix + std::to_string(::getpid()) + "." + std::to_string(counter++);
  if (::mkdir(staging_.c_str(), 0700) != 0) {
    const int error_number = errno;
    if (made_dir_) ::rmdir(dir_.c_str());
    fail("cannot write into folder '{}': {}", dir_, std::strerror(error_number));
  }
}

StagedFolder::~StagedFolder() {
  if (!committed_) discard();
}

std::string StagedFolder::path(const std::string& name) const { return staging_ + "/" + name; }

void StagedFolder::commit() {
  KVC_CHECK(!committed_, "internal: folder '{}' committed twice", dir_);
  std::vector<std::string> outputs;
  for (const std::string& name : files_in(staging_)) {
    // Temporary files of an atomic write that did not finish are not outputs.
    if (name[0] == '.' && name.find(".tmp.") != std::string::npos) continue;
    // A rename replaces whatever has the name; only a regular file (an earlier run's output) may be.
    struct stat st {};
    const std::string to = dir_ + "/" + name;
    KVC_CHECK(::lstat(to.c_str(), &st) != 0 || S_ISREG(st.st_mode),
              "cannot write '{}': it exists and is not a regular file; move it away or choose another --out-dir", to);
    outputs.push_back(name);
  }
  for (const std::string& name : outputs) {
    const std::string to = dir_ + "/" + name;
    if (::rename((staging_ + "/" + name).c_str(), to.c_str()) != 0)
      fail("cannot move '{}' into '{}': {}", name, dir_, std::strerror(errno));
  }
  remove_staging(staging_);
  committed_ = true;
}

void StagedFolder::discard() noexcept {
  remove_staging(staging_);
  if (made_dir_) ::rmdir(dir_.c_str());  // only if still empty
}

}  // namespace kvc
