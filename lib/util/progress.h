#pragma once
// A progress line on stderr ("label [=====>   ] 40/100 12.3 it/s ETA 5s"), redrawn at most 10 times a
// second and only when stderr is a terminal; otherwise one line every few seconds, so logs stay short.
#include <chrono>
#include <cstdint>
#include <string>

namespace kvc {

// Off for the whole process after a tool's -q/--quiet: no progress line is drawn, whatever a caller asks.
void set_progress_lines(bool shown);

class Progress {
 public:
  // With quiet_for_seconds > 0 nothing is drawn, not even the final line, until the work has run that
  // long: a phase that is usually quick (a short prompt's prefill) stays silent.
  Progress(std::string label, int64_t total, std::string unit = "it", bool enabled = true,
           double quiet_for_seconds = 0);
  ~Progress();
  void advance(int64_t n = 1);
  void set(int64_t done);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_, unit_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_, finished_ = false, drawn_ = false;
  double quiet_for_seconds_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace kvc
