#pragma once
// kvc-eval sweep's flags, its plan of cells, and what its tasks read (loaded once per sweep): the text
// of ppl and kl, the needle grid's haystack, RULER's data, and the samples of each sampled task.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "eval/kl_divergence.h"
#include "harness/sweep_plan.h"
#include "harness/task_eval.h"
#include "ruler_run.h"
#include "task_command.h"
#include "tasks/haystack.h"

namespace kvc::eval_app {

struct SweepOptions : TaskCommandOptions {
  std::vector<std::string> methods{"none"};
  std::vector<std::string> method_specs;  // NAME=SPEC: the cells of NAME run SPEC
  std::vector<std::string> retrieval;
  std::vector<std::string> lowrank;
  std::vector<std::string> lowrank_presses;
  std::vector<std::string> typed;  // cache types, a row each
  std::vector<std::string> typed_presses;
  std::string ratios = "0.25,0.5,0.75,0.9";
  std::string tasks = "kl,needle";
  std::string file;
  KlOptions kl;
  std::string haystack;
  std::string needle_lengths, needle_depths = "0,0.5,1";
  std::string templates = "secret";
  int samples = 3;
  std::string task_lengths;
  int64_t max_new_tokens = 32;
  int64_t ruler_new_tokens = 0;  // 0: RULER's tokens_to_generate
  std::string qa_dir;
  std::string prefill = "shared";
  int64_t lockstep = kDefaultLockstepSetups;  // cells of one shared prefill decoded together
  int64_t max_cells = 0;
  std::string shard;
};

// Every task sweep runs: ppl, kl, needle, kvc's synthetic tasks and RULER's.
std::vector<std::string> sweep_task_names();
// ppl and kl score a text file window by window; the other tasks score samples.
bool is_text_task(const std::string& task);

// What one task needs, loaded once per sweep.
struct TaskInputs {
  std::vector<int> text_ids;  // ppl, kl
  std::vector<std::string> haystack_files;
  std::string haystack;
  NeedleGridOptions needle;
  std::vector<int64_t> task_lengths;
  RulerData ruler;
};

// Every task's cells: the press cells of plan_sweep, then its retrieval and low-rank rows, task by task.
std::vector<SweepCell> plan_cells(const SweepOptions& o, const std::vector<std::string>& tasks);

// What `tasks` read, checked against their flags (kvc::Error naming the missing flag).
TaskInputs load_inputs(const SweepOptions& o, const std::vector<std::string>& tasks, const TaskRun& loaded);

// The samples of a sampled task, in the order its cells list them.
std::vector<TaskItem> task_items(const SweepOptions& o, const std::string& task, const EvalContext& ctx,
                                 const TaskInputs& in);

// A finished ppl or kl cell's result: the perplexity (ppl) or mean KL (kl) of the compressed cache against
// the uncompressed model, and the rest of `r`.
nlohmann::json text_cell_result(const SweepOptions& o, const std::string& task, const KlResult& r);

}  // namespace kvc::eval_app
