#pragma once
#include <cstdint>
#include <string>

namespace kvc {

// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
int64_t peak_rss_bytes();
int64_t current_rss_bytes();
std::string iso_timestamp_utc();

}  // namespace kvc
