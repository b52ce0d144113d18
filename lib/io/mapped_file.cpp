#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/files.h"
#include "util/run_files.h"
#include "util/standard_input.h"

namespace kvc::st {

MappedFile::MappedFile(const std::string& path) {
  // "-": standard input, copied into memory once (util/standard_input.h); messages name what was typed.
  const std::string source = input_path(path);
  KVC_CHECK(file_exists(source), "file not found: '{}'", path);
  KVC_CHECK(!is_directory(source), "'{}' is a folder, expected a file", path);
  struct stat before {};
  KVC_CHECK(::stat(source.c_str(), &before) == 0 && S_ISREG(before.st_mode),
            "'{}' is not a regular file (a pipe or device cannot be mapped); give the file itself", path);
  // O_NONBLOCK: should the path become a FIFO after the check, open() returns instead of waiting.
  const int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  KVC_CHECK(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'{}' is not a regular file", path);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  device_ = static_cast<unsigned long>(st.st_dev);
  inode_ = static_cast<unsigned long>(st.st_ino);
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int mmap_errno = errno;
    ::close(fd);  // the mapping keeps the file alive on its own
    KVC_CHECK(mapping != MAP_FAILED, "cannot map '{}': {}", path, std::strerror(mmap_errno));
    data_ = static_cast<const uint8_t*>(mapping);
  } else {
    ::close(fd);
  }
  note_mapped_input(path, device_, inode_);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  release_mapped_input(device_, inode_);
}

}  // namespace kvc::st
