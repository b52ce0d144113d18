#include "util/standard_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "util/error.h"

namespace kvc {
namespace {

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    KVC_CHECK(n > 0, "cannot keep standard input in memory: {}", std::strerror(errno));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// The copy of standard input, made on first use; the descriptor stays open for the run.
std::string copy_standard_input() {
  const int fd = ::memfd_create("kvc-standard-input", MFD_CLOEXEC);
  KVC_CHECK(fd >= 0, "cannot keep standard input in memory: {}", std::strerror(errno));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    KVC_CHECK(n >= 0, "cannot read standard input ('-'): {}", std::strerror(errno));
    if (n == 0) break;
    write_all(fd, buffer, static_cast<size_t>(n));
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

std::string input_path(const std::string& path) {
  if (path != "-") return path;
  static std::once_flag once;
  static std::string copy;
  std::call_once(once, [] { copy = copy_standard_input(); });
  return copy;
}

}  // namespace kvc
