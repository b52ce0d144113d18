#pragma once
// Wall-clock intervals for timings that are reported (steady: never jumps with the system clock).
#include <chrono>

namespace kvc {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace kvc
