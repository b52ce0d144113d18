#pragma once
// LongBench's prediction files: the JSONL lines its pred.py writes ("pred", "answers", "all_classes",
// "length") and its eval.py scores. kvc-eval longbench writes them next to its results, and
// kvc-eval longbench-score scores any such file as eval.py does.
#include <string>
#include <vector>

#include "tasks/longbench.h"

namespace kvc {

struct LongBenchPredictions {
  std::vector<std::string> predictions;
  std::vector<TaskSample> samples;  // answers and all_classes of each line
  std::vector<LongBenchRecord> records;
  size_t skipped_lines = 0;
};

// Bad lines (not JSON, "pred" not a string, "answers" missing or not strings/integers) are reported as
// file:line and skipped or stop the load, as `on_bad_line` says. eval.py scores every line against the
// *last* line's "all_classes" (its loop variable outlives the loop); so does this: each sample's
// all_classes is the last line's. Throws kvc::Error if the file cannot be read.
LongBenchPredictions load_longbench_predictions(const std::string& path, OnBadLine on_bad_line);

// One line as pred.py writes it (json.dump with ensure_ascii=False), without the newline.
std::string longbench_prediction_line(const std::string& prediction, const TaskSample& sample,
                                      const LongBenchRecord& record);

}  // namespace kvc
