#pragma once
// The readers open paths (they map files), so each input is handed over as an in-memory file:
// a memfd reached through /proc/self/fd, which costs no disk writes per execution.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace kvc::fuzz {

// A refused input is the expected outcome; KVC_FUZZ_VERBOSE=1 prints why (to check that seeds load).
inline void rejected(const std::exception& e) {
  static const bool verbose = std::getenv("KVC_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
}

class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("kvc-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace kvc::fuzz
