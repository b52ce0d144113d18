#include "util/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace kvc {

OutputLock::OutputLock(const std::string& dir, const std::string& name, const std::string& flag) {
  const std::string path = dir + "/." + name + ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  KVC_CHECK(fd_ >= 0, "{} '{}': cannot open its lock file '{}': {}", flag, dir, path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error_number = errno;
    ::close(fd_);
    fd_ = -1;
    KVC_CHECK(error_number != EWOULDBLOCK,
              "{} '{}': another run is writing {} there; wait for it to end or give "
              "another folder",
              flag, dir, name);
    fail("{} '{}': cannot lock '{}': {}", flag, dir, path, std::strerror(error_number));
  }
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kvc
