#pragma once
// Metrics by name, so that data sets and tools can name the metric they are scored with.
#include <string>
#include <vector>

namespace kvc {

// LongBench's "qa_f1", "rouge_l", "classification", "code_sim", "retrieval", "count" and Chinese
// "qa_f1_zh", "rouge_zh", "retrieval_zh" (zh_metrics.h); "exact_match"; kvc's RULER-style "contains";
// RULER's own "string_match_all" and "string_match_part" (ruler_metrics.h).
const std::vector<std::string>& metric_names();

// Throws kvc::Error listing the valid names when `name` is not one of metric_names().
void check_metric_name(const std::string& name);

// Score of one prediction in [0, 1]. As LongBench does, the best score over the acceptable answers (0
// when there are none); "contains" instead asks for all answers at once (RULER string_match_all), since
// its answers are the several values one question asks for.
double score_with_metric(const std::string& name, const std::string& prediction,
                         const std::vector<std::string>& answers, const std::vector<std::string>& all_classes = {});

}  // namespace kvc
