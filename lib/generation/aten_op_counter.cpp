#include "generation/aten_op_counter.h"

#include <ATen/record_function.h>

#include <memory>

namespace kvc {
namespace {

thread_local int64_t dispatched = 0;
thread_local std::map<std::string, int64_t> dispatched_by_name;

std::unique_ptr<at::ObserverContext> on_call(const at::RecordFunction& call) {
  ++dispatched;
  ++dispatched_by_name[call.name()];
  return nullptr;
}

}  // namespace

AtenOpCounter::AtenOpCounter()
    : handle_(at::addThreadLocalCallback(at::RecordFunctionCallback(on_call).scopes({at::RecordScope::FUNCTION}))),
      start_(dispatched),
      start_by_name_(dispatched_by_name) {}

AtenOpCounter::~AtenOpCounter() { at::removeCallback(handle_); }

int64_t AtenOpCounter::count() const { return dispatched - start_; }

std::map<std::string, int64_t> AtenOpCounter::count_by_name() const {
  std::map<std::string, int64_t> calls;
  for (const auto& [name, total] : dispatched_by_name) {
    const auto before = start_by_name_.find(name);
    const int64_t since = total - (before == start_by_name_.end() ? 0 : before->second);
    if (since > 0) calls[name] = since;
  }
  return calls;
}

}  // namespace kvc
