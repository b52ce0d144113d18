#pragma once
// One writer per output: a run that appends to files in a folder (a sweep's results.jsonl, needle's
// cells.jsonl, a replay's steps) holds an exclusive lock on `.<name>.lock` there for as long as it
// writes, so that a second run on the same folder stops at once instead of interleaving its records
// with the first's. The lock is flock(2): the kernel releases it when the process ends, however it
// ends, so a killed run leaves no lock to clean up (the empty lock file stays; it is reused).
#include <string>

namespace kvc {

class OutputLock {
 public:
  // Throws kvc::Error naming `flag` and `dir` when another process holds the lock.
  OutputLock(const std::string& dir, const std::string& name, const std::string& flag);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace kvc
