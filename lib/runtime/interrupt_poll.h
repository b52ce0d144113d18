#pragma once
// A Ctrl-C on any rank stops every rank of a loop whose iterations have no collective of their own.
// Asking all ranks every iteration costs a round trip each time and holds the ranks in lockstep, so they
// ask every `rounds` iterations, a count set from the root's clock to about half a second between asks
// (the ranks wait for each other at each ask: 3% of a stories260K calibration at a quarter second). The
// count travels with the answer, so every rank asks at the same iterations.
#include <chrono>
#include <cstdint>

#include "runtime/ranks.h"

namespace kvc {

class InterruptPoll {
 public:
  explicit InterruptPoll(const Ranks& ranks) : ranks_(ranks), last_(std::chrono::steady_clock::now()) {}
  // Called at the same iterations on every rank: true once any rank has been interrupted.
  bool stop();

 private:
  const Ranks& ranks_;
  int64_t rounds_ = 1, until_next_ = 0;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kvc
