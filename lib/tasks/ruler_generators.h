#pragma once
// The RULER generators behind make_ruler_sample (internal to lib/tasks; ruler_registry.cpp names the
// thirteen configurations).
#include <string>

#include "tasks/ruler_tasks.h"

namespace kvc {

enum class RulerHaystack { kNoise, kEssay, kNeedle };
enum class RulerValue { kWords, kNumbers, kUuids };

struct RulerNiahConfig {
  const char* task;
  RulerHaystack haystack;
  RulerValue key, value;
  size_t keys, values, queries;  // num_needle_k, num_needle_v, num_needle_q
};

TaskSample make_ruler_niah(const RulerNiahConfig& config, const RulerRequest& request, const TokenCounter& counter,
                           const std::string& essay);
TaskSample make_ruler_vt(const RulerRequest& request, const TokenCounter& counter);
TaskSample make_ruler_cwe(const RulerRequest& request, const TokenCounter& counter);
TaskSample make_ruler_fwe(const RulerRequest& request, const TokenCounter& counter);
TaskSample make_ruler_qa(const std::string& task, const RulerQaData& data, const RulerRequest& request,
                         const TokenCounter& counter);

}  // namespace kvc
