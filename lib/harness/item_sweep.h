#pragma once
// A sweep's cells of one sampled task (needle, RULER, synthetic), run sample by sample: each sample is
// prefilled once for every cell whose compression can share the prefill (shared_prefill.h), and its
// records are checkpointed before the next sample starts, so an interrupted sweep resumes mid-cell.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/result_store.h"
#include "harness/sweep_plan.h"
#include "harness/task_eval.h"

namespace kvc {

// A finished cell's result: mean score, mean compression ratio, the mean of each item group (grid cell)
// in first-appearance order, and every sample. `records` are in the order of `items`.
nlohmann::json sampled_cell_result(const std::string& task, const std::vector<TaskItem>& items,
                                   const std::vector<SampleRecord>& records);

struct ItemSweepOutcome {
  std::vector<std::vector<SampleRecord>> records;  // per cell, in item order; complete only if `complete`
  bool complete = false;                           // false: interrupted before the last item
  SharedPrefillCost cost;                          // of the samples run here (not those read back)
  int64_t samples_run = 0, samples_reused = 0;     // item runs, and (cell, item) records read back
};

// Runs every item under every cell's setup (cells[i] under setups[i]): with `share_prefill`, one shared
// prefill per item; without, each cell's sample runs alone (run_sample), as a sweep of one cell would.
// `checkpoint` keeps (cell, item) records under the key "<cell key>|<item index>" with `settings`:
// those already there are read back instead of run. Stops between cells once kvc::interrupted(), the
// item's finished cells checkpointed.
// `on_item` (may be empty) is called after each item.
ItemSweepOutcome run_item_sweep(const EvalContext& ctx, const std::vector<TaskItem>& items,
                                const std::vector<SweepCell>& cells, const std::vector<CacheSetup>& setups,
                                ResultStore& checkpoint, const std::string& settings, bool share_prefill,
                                const std::function<void()>& on_item = {});

}  // namespace kvc
