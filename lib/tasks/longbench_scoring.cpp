#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "metrics/metric_registry.h"
#include "tasks/longbench.h"
#include "util/error.h"

namespace kvc {

namespace {

// Python's round(x, 2): the exact binary value rounded to two decimals, ties to even, which is what
// glibc's printf does in the default rounding mode.
double round_to_hundredths(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", value);
  return std::strtod(text, nullptr);
}

}  // namespace

double score_prediction(const DatasetSpec& spec, const std::string& prediction, const TaskSample& sample) {
  std::string scored = prediction;
  if (spec.first_line_only) {
    // prediction.lstrip('\n').split('\n')[0]
    const size_t begin = std::min(scored.find_first_not_of('\n'), scored.size());
    scored = scored.substr(begin, scored.find('\n', begin) - begin);
  }
  return score_with_metric(spec.metric, scored, sample.answers, sample.all_classes);
}

double longbench_percent(const std::vector<double>& scores) {
  if (scores.empty()) return std::numeric_limits<double>::quiet_NaN();
  double total = 0;
  for (double score : scores) total += score;
  return round_to_hundredths(100.0 * total / static_cast<double>(scores.size()));
}

std::vector<LengthBucket> longbench_e_buckets(const std::vector<double>& scores,
                                              const std::vector<LongBenchRecord>& records) {
  KVC_CHECK(scores.size() <= records.size(), "LongBench-E buckets: {} scores for {} records", scores.size(),
            records.size());
  std::vector<double> by_bucket[3];
  for (size_t i = 0; i < scores.size(); ++i) {
    const int64_t length = records[i].length;
    KVC_CHECK(length >= 0, "line {}: no \"length\" field, which LongBench-E's length buckets need", records[i].line);
    by_bucket[length < 4000 ? 0 : length < 8000 ? 1 : 2].push_back(scores[i]);
  }
  const char* names[3] = {"0-4k", "4-8k", "8k+"};
  std::vector<LengthBucket> buckets;
  for (int b = 0; b < 3; ++b) buckets.push_back({names[b], by_bucket[b].size(), longbench_percent(by_bucket[b])});
  return buckets;
}

}  // namespace kvc
