#pragma once
// A sweep's KL / perplexity cells run window by window: each window's exact reference run is made once
// for every cell (evaluate_kl would make it once per cell), and the cells whose compression can share a
// prefill (shared_prefill.h) take their compressed first half from one prefill, then feed the rest on
// their own. Each (cell, window) score is checkpointed before the next window starts, so an interrupted
// sweep resumes mid-cell. Every cell's result equals evaluate_kl's for its setup exactly.
#include <functional>
#include <string>
#include <vector>

#include "eval/kl_divergence.h"
#include "harness/result_store.h"
#include "harness/shared_prefill.h"
#include "harness/sweep_plan.h"

namespace kvc {

struct KlSweepOutcome {
  std::vector<KlResult> results;  // per cell; valid only if `complete`
  bool complete = false;          // false: interrupted before the last window
  SharedPrefillCost cost;         // of the windows run here (not those read back); the reference runs count as prefills
};

// Runs every cell (cells[i] under setups[i]) over the windows of `ids`. Without `share_prefill` each
// cell still shares the reference but prefills alone. `checkpoint` keeps (cell, window) scores under
// the key "<cell key>|window <w>" with `settings`: those already there are read back instead of run.
// Stops between cells once `stop` answers true (kvc::interrupted() when not given), the window's finished
// cells checkpointed. `on_window` (may be empty) is called after each window.
KlSweepOutcome run_kl_sweep(const LlamaModel& model, const std::vector<int>& ids, const KlOptions& options,
                            const std::vector<SweepCell>& cells, const std::vector<CacheSetup>& setups,
                            ResultStore& checkpoint, const std::string& settings, bool share_prefill,
                            const std::function<void()>& on_window = {}, const std::function<bool()>& stop = {});

}  // namespace kvc
