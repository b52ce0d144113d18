#pragma once
// RULER's scorers (scripts/eval/synthetic/constants.py) with evaluate.py's postprocess_pred applied to
// the prediction first, as RULER's evaluation does. References are used as given. Matching is Python's
// `r.lower() in pred.lower()` on code points (python_unicode.h), so scores agree with the official ones on
// any text; bytes that are not UTF-8 count as U+FFFD, as a Python decoder with errors="replace" gives.
#include <string>
#include <vector>

namespace kvc {

// postprocess_pred: strip Python whitespace, turn each of U+0000..U+001F into '\n', strip again.
std::string ruler_postprocess_prediction(const std::string& prediction);

// One sample, in [0, 1] (RULER's per-sample term, before its x100 and rounding): the share of the
// references found in the prediction (niah, vt, cwe, fwe). 0 when there are no references, where
// RULER divides by zero.
double ruler_string_match_all(const std::string& prediction, const std::vector<std::string>& references);

// 1 when any reference is found (qa). 0 when there are no references, where RULER's max() fails.
double ruler_string_match_part(const std::string& prediction, const std::vector<std::string>& references);

// A task's score as evaluate.py reports it: the per-sample scores of `metric` ("string_match_all" or
// "string_match_part") averaged, times 100, rounded to 2 decimals as Python's round() does.
double ruler_task_score(const std::string& metric, const std::vector<std::string>& predictions,
                        const std::vector<std::vector<std::string>>& references);

}  // namespace kvc
