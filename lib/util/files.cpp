#include "util/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "util/error.h"
#include "util/run_files.h"
#include "util/standard_input.h"

namespace kvc {
namespace {

// The same limit as the kernel's, so a symlink loop ends in an error instead of a hang.
constexpr int kMaxSymlinkHops = 40;

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Follows symlinks one hop at a time (also dangling ones, whose target a write creates). Only the last
// component matters: folders on the way are resolved by the kernel as usual.
std::string follow_symlinks(const std::string& path) {
  // A link that ends at a pipe or device is opened as given: /dev/stdout -> /proc/self/fd/1 -> "pipe:[N]"
  // only resolves through the kernel's own lookup.
  struct stat resolved {};
  if (::stat(path.c_str(), &resolved) == 0 && !S_ISREG(resolved.st_mode) && !S_ISDIR(resolved.st_mode)) return path;
  std::string current = path;
  for (int hop = 0; hop < kMaxSymlinkHops; ++hop) {
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    char buffer[PATH_MAX];
    const ssize_t length = ::readlink(current.c_str(), buffer, sizeof buffer);
    if (length < 0) return current;
    const std::string link(buffer, static_cast<size_t>(length));
    current = link.front() == '/' ? link : parent_of(current) + "/" + link;
  }
  fail("cannot write '{}': too many levels of symbolic links", path);
}

// A file the writer may replace by renaming: a regular file or nothing yet.
bool is_replaceable(const std::string& target, struct stat& st) {
  if (::stat(target.c_str(), &st) != 0) return true;
  return S_ISREG(st.st_mode);
}

void check_writable_folder(const std::string& user_path, const std::string& folder) {
  KVC_CHECK(is_directory(folder), "cannot write '{}': folder '{}' does not exist", user_path, folder);
  KVC_CHECK(::access(folder.c_str(), W_OK) == 0, "cannot write '{}': folder '{}' is not writable", user_path, folder);
}

}  // namespace

std::string temp_path_beside(const std::string& target) {
  static std::atomic<unsigned> counter{0};
  return parent_of(target) + "/." + base_name_of(target) + ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(counter++);
}

void remove_stale_temps_beside(const std::string& target) {
  const std::string prefix = "." + base_name_of(target) + ".tmp.";
  DIR* dir = ::opendir(parent_of(target).c_str());
  if (dir == nullptr) return;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos) continue;
    const std::string digits = rest.substr(0, dot);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string path = parent_of(target) + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) ::unlink(path.c_str());
  }
  ::closedir(dir);
}

std::string read_text_file(const std::string& path) {
  if (path == "-") {  // standard input, as every tool's -f - means (read once: util/standard_input.h)
    std::ifstream in(input_path(path), std::ios::binary);
    KVC_CHECK(in.good(), "cannot read standard input: {}", std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
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
  OutputFile out(path);
  out.write(contents);
  out.commit();
}

void check_writable_output(const std::string& path) {
  KVC_CHECK(!path.empty(), "an output path is empty");
  if (path == "-") return;
  check_output_is_not_an_input(path);
  const std::string target = follow_symlinks(path);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    KVC_CHECK(!S_ISDIR(st.st_mode), "cannot write '{}': it is a folder", path);
    if (!S_ISREG(st.st_mode)) {
      KVC_CHECK(::access(target.c_str(), W_OK) == 0, "cannot write '{}': {}", path, std::strerror(errno));
      return;
    }
  }
  check_writable_folder(path, parent_of(target));
}

void check_writable_output_folder(const std::string& dir) {
  KVC_CHECK(!dir.empty(), "an output folder path is empty");
  if (file_exists(dir)) {
    KVC_CHECK(is_directory(dir), "cannot write into '{}': it is not a folder", dir);
    KVC_CHECK(::access(dir.c_str(), W_OK) == 0, "cannot write into '{}': folder is not writable", dir);
    return;
  }
  // Result folders are created with their missing parents (as mkdir -p): the nearest existing
  // ancestor decides.
  std::string ancestor = parent_of(dir);
  while (!file_exists(ancestor) && parent_of(ancestor) != ancestor) ancestor = parent_of(ancestor);
  KVC_CHECK(is_directory(ancestor), "cannot create '{}': '{}' is not a folder", dir, ancestor);
  KVC_CHECK(::access(ancestor.c_str(), W_OK) == 0, "cannot create '{}': folder '{}' is not writable", dir, ancestor);
}

OutputFile::OutputFile(const std::string& path) : user_path_(path) {
  KVC_CHECK(!path.empty(), "an output path is empty");
  if (path == "-") {
    fd_ = STDOUT_FILENO;
    owns_fd_ = false;
    return;
  }
  target_path_ = follow_symlinks(path);
  struct stat st {};
  if (!is_replaceable(target_path_, st)) {
    KVC_CHECK(!S_ISDIR(st.st_mode), "cannot write '{}': it is a folder", path);
    // Pipes and devices are written in place: renaming over them would replace, not feed, them.
    fd_ = ::open(target_path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot write '{}': {}", path, std::strerror(errno));
    return;
  }
  check_output_is_not_an_input(path);
  remove_stale_temps_beside(target_path_);
  const bool existed = ::stat(target_path_.c_str(), &st) == 0;
  temp_path_ = temp_path_beside(target_path_);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int error_number = errno;
    temp_path_.clear();
    check_writable_folder(path, parent_of(target_path_));
    fail("cannot write '{}': {}", path, std::strerror(error_number));
  }
  // A replaced file keeps its permissions, as it would if it were overwritten in place.
  if (existed) (void)::fchmod(fd_, st.st_mode & 07777);
}

OutputFile::~OutputFile() {
  if (!committed_) discard();
}

void OutputFile::discard() {
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void OutputFile::fail_with_errno(int error_number) {
  discard();
  committed_ = true;  // nothing left to clean up
  if (user_path_ == "-") fail("cannot write to standard output ('-'): {}", std::strerror(error_number));
  fail("cannot write '{}': {}", user_path_, std::strerror(error_number));
}

void OutputFile::write(const void* data, size_t size) {
  KVC_CHECK(fd_ >= 0, "cannot write '{}': the file is already closed", user_path_);
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    // A write that makes no progress without an error is a full device by another name.
    if (written <= 0) fail_with_errno(written < 0 ? errno : ENOSPC);
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void OutputFile::commit(const std::function<void()>& before_rename) {
  KVC_CHECK(fd_ >= 0, "cannot write '{}': the file is already closed", user_path_);
  if (temp_path_.empty()) {
    if (before_rename) before_rename();
    if (owns_fd_ && ::close(fd_) != 0) {
      const int error_number = errno;
      fd_ = -1;
      fail_with_errno(error_number);
    }
    fd_ = -1;
    committed_ = true;
    return;
  }
  // Delayed allocation can report a full disk only at fsync or close, so both are checked.
  if (::fsync(fd_) != 0) fail_with_errno(errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail_with_errno(errno);
  if (before_rename) before_rename();  // on a throw, the destructor removes the temporary file
  if (::rename(temp_path_.c_str(), target_path_.c_str()) != 0) fail_with_errno(errno);
  temp_path_.clear();
  committed_ = true;
  // Makes the rename itself durable; a folder that cannot be opened only loses that guarantee.
  const int dir_fd = ::open(parent_of(target_path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace kvc
