#include "util/process_stats.h"

#include <ctime>
#include <fstream>
#include <string>

namespace kvc {

static int64_t status_field_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size())) * 1024;
  }
  return 0;
}

int64_t peak_rss_bytes() { return status_field_kb("VmHWM:"); }
int64_t current_rss_bytes() { return status_field_kb("VmRSS:"); }

std::string iso_timestamp_utc() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

}  // namespace kvc
