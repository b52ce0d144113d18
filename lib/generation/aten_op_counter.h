#pragma once
// Counts the ATen operator calls this thread dispatches while the counter lives: the framework's
// per-call overhead (dispatch, allocation, bookkeeping) that a decode step pays for every small tensor
// operation. Unlike a time, the count does not depend on what else runs on the machine, so it tells
// which compressed paths carry extra work per step even on a busy one. Counting itself costs a callback
// per call (well under a microsecond), so benchmarks that time steps leave it off.
#include <cstdint>

namespace kvc {

class AtenOpCounter {
 public:
  AtenOpCounter();
  ~AtenOpCounter();
  AtenOpCounter(const AtenOpCounter&) = delete;
  AtenOpCounter& operator=(const AtenOpCounter&) = delete;
  // Calls dispatched on this thread since construction (ops that another op calls count too).
  int64_t count() const;

 private:
  uint64_t handle_;
  int64_t start_;
};

}  // namespace kvc
