#include "util/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace kvc {
namespace {

std::atomic<bool> progress_lines{true};

}  // namespace

void set_progress_lines(bool shown) { progress_lines = shown; }

Progress::Progress(std::string label, int64_t total, std::string unit, bool enabled, double quiet_for_seconds)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(total, 1)),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) != 0),
      quiet_for_seconds_(quiet_for_seconds),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::advance(int64_t n) { set(done_ + n); }

void Progress::set(int64_t done) {
  done_ = std::min(done, total_);
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  // In a log, the first line comes as soon as a delayed progress may show; then one every 5 s.
  const double every = tty_ ? 0.1 : (drawn_ || quiet_for_seconds_ <= 0 ? 5.0 : quiet_for_seconds_);
  if (since >= every) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final_line) {
  if (!enabled_ || !progress_lines) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!drawn_ && elapsed < quiet_for_seconds_) return;
  drawn_ = true;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * static_cast<double>(done_) / static_cast<double>(total_));
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
  // Slow items (a whole sweep cell) read better as seconds per item than as 0.0 items per second.
  const std::string speed = rate >= 1.0 || rate == 0.0 ? fmt::format("{:.1f} {}/s", rate, unit_)
                                                       : fmt::format("{:.1f} s/{}", 1.0 / rate, unit_);
  std::string line = fmt::format("{} [{}] {}/{} {} {} {:.0f}s", label_, bar, done_, total_, speed,
                                 final_line ? "in" : "ETA", final_line ? elapsed : eta);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace kvc
