#include "util/warn_once.h"

#include <cstdio>
#include <mutex>
#include <set>

#include "util/printable.h"

namespace kvc {

bool warn_once(const std::string& key, const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(mutex);
  if (!printed.insert(key).second) return false;
  std::fprintf(stderr, "warning: %s\n", printable(text).c_str());
  std::fflush(stderr);
  return true;
}

}  // namespace kvc
