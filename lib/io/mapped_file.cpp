#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/files.h"

namespace kvc::st {

MappedFile::MappedFile(const std::string& path) {
  KVC_CHECK(file_exists(path), "file not found: '{}'", path);
  KVC_CHECK(!is_directory(path), "'{}' is a folder, expected a file", path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KVC_CHECK(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'{}' is not a regular file", path);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int mmap_errno = errno;
    ::close(fd);  // the mapping keeps the file alive on its own
    KVC_CHECK(mapping != MAP_FAILED, "cannot map '{}': {}", path, std::strerror(mmap_errno));
    data_ = static_cast<const uint8_t*>(mapping);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace kvc::st
