#pragma once
// RULER's tasks inside `kvc-eval tasks`: the task list (the `ruler` group, QA tasks only with --qa-dir),
// the inputs they read (essays, QA data sets) loaded once, and one scored sample.
#include <optional>
#include <string>
#include <vector>

#include "harness/task_eval.h"
#include "tasks/ruler_tasks.h"

namespace kvc::eval_app {

// `names` with "ruler" replaced by RULER's 13 tasks; qa_1 and qa_2 from the group are dropped, with a
// one-line note on stderr, when `qa_dir` is empty (named on their own they stay and fail in load).
std::vector<std::string> expand_ruler_group(const std::vector<std::string>& names, const std::string& qa_dir);

struct RulerData {
  std::string essay;
  std::optional<RulerQaData> squad, hotpotqa;
  std::vector<std::string> files;  // what was read, for the run's metadata
  RulerInputs view() const;
};

// What the RULER tasks among `tasks` read: the essay haystack from `haystack_path` (a file or folder;
// default data/text/pg_essays) and the QA sets from `qa_dir`. Throws kvc::Error naming the flag.
RulerData load_ruler_data(const std::vector<std::string>& tasks, const std::string& haystack_path,
                          const std::string& qa_dir);

// Sample `index` of a RULER task at a length of `length` tokens (prompt and generated tokens, as RULER
// counts), scored with the task's metric. Decoding runs for `max_new_tokens` (0: RULER's
// tokens_to_generate) without stopping at a line break, as RULER generates.
TaskItem ruler_item(const EvalContext& ctx, const std::string& task, int64_t length, int index, uint64_t run_seed,
                    const RulerInputs& inputs, int64_t max_new_tokens);
// That item run under `setup`.
SampleRecord run_ruler_sample(const EvalContext& ctx, const CacheSetup& setup, const std::string& task, int64_t length,
                              int index, uint64_t run_seed, const RulerInputs& inputs, int64_t max_new_tokens);

}  // namespace kvc::eval_app
