#pragma once
// Counts the ATen operator calls this thread dispatches while the counter lives: the framework's
// per-call overhead (dispatch, allocation, bookkeeping) that a decode step pays for every small tensor
// operation. Unlike a time, the count does not depend on what else runs on the machine, so it tells
// which compressed paths carry extra work per step even on a busy one. Counting itself costs a callback
// and a map update per call, so benchmarks that time steps leave it off.
#include <cstdint>
#include <map>
#include <string>

namespace kvc {

class AtenOpCounter {
 public:
  AtenOpCounter();
  ~AtenOpCounter();
  AtenOpCounter(const AtenOpCounter&) = delete;
  AtenOpCounter& operator=(const AtenOpCounter&) = delete;
  // Calls dispatched on this thread since construction (ops that another op calls count too).
  int64_t count() const;
  // The same calls by operator name ("aten::narrow", ...); the counts sum to count().
  std::map<std::string, int64_t> count_by_name() const;

 private:
  uint64_t handle_;
  int64_t start_;
  std::map<std::string, int64_t> start_by_name_;
};

}  // namespace kvc
