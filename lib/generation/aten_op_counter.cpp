#include "generation/aten_op_counter.h"

#include <ATen/record_function.h>

#include <memory>

namespace kvc {
namespace {

thread_local int64_t dispatched = 0;

std::unique_ptr<at::ObserverContext> on_call(const at::RecordFunction&) {
  ++dispatched;
  return nullptr;
}

}  // namespace

AtenOpCounter::AtenOpCounter()
    : handle_(at::addThreadLocalCallback(at::RecordFunctionCallback(on_call).scopes({at::RecordScope::FUNCTION}))),
      start_(dispatched) {}

AtenOpCounter::~AtenOpCounter() { at::removeCallback(handle_); }

int64_t AtenOpCounter::count() const { return dispatched - start_; }

}  // namespace kvc
