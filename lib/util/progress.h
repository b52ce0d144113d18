#pragma once
// A progress line on stderr ("label [=====>   ] 40/100 12.3 it/s ETA 5s"), redrawn at most 10 times a
// second and only when stderr is a terminal; otherwise one line every few seconds, so logs stay short.
#include <chrono>
#include <cstdint>
#include <string>

namespace kvc {

class Progress {
 public:
  Progress(std::string label, int64_t total, std::string unit = "it", bool enabled = true);
  ~Progress();
  void advance(int64_t n = 1);
  void set(int64_t done);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_, unit_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace kvc
