#pragma once
// Streams a model over calibration tokens and accumulates, per layer, the second moments of its
// pre-RoPE keys and values (all KV heads concatenated) and of its keys after RoPE, then turns them into
// PCA bases. Over several
// ranks, window w is run by rank w % world and the float64 sums are added up across ranks: the same
// bases as one process, up to the order of the additions.
#include <string>
#include <vector>

#include "lowrank/covariance.h"
#include "lowrank/lowrank_artifacts.h"
#include "model/llama_model.h"
#include "runtime/ranks.h"

namespace kvc::lowrank {

struct CalibrationOptions {
  int64_t tokens = 100000;  // at most this many tokens
  int64_t seq_len = 256;    // window length (each window starts from an empty cache)
  bool show_progress = true;
};

struct CalibrationResult {
  std::vector<EigenBasis> keys, values;  // per layer
  std::vector<EigenBasis> rotated_keys;  // per layer: the keys after RoPE at their positions
  int64_t tokens = 0;
  double exchange_seconds = 0;  // waiting for the other ranks and adding up their sums (0 alone)
};

// `ranks` null: this process alone.
CalibrationResult calibrate(const LlamaModel& model, const std::vector<int>& ids, const CalibrationOptions& options,
                            const Ranks* ranks = nullptr);

// The bases artifact (U = eigenvectors) with the given extra metadata.
Artifact bases_artifact(const CalibrationResult& result);

}  // namespace kvc::lowrank
