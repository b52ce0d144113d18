#pragma once
// Streams a model over calibration tokens and accumulates, per layer, the second moments of its
// pre-RoPE keys and values (all KV heads concatenated), then turns them into PCA bases.
#include <string>
#include <vector>

#include "lowrank/covariance.h"
#include "lowrank/lowrank_artifacts.h"
#include "model/llama_model.h"

namespace kvc::lowrank {

struct CalibrationOptions {
  int64_t tokens = 100000;  // at most this many tokens
  int64_t seq_len = 256;    // window length (each window starts from an empty cache)
  bool show_progress = true;
};

struct CalibrationResult {
  std::vector<EigenBasis> keys, values;  // per layer
  int64_t tokens = 0;
};

CalibrationResult calibrate(const LlamaModel& model, const std::vector<int>& ids, const CalibrationOptions& options);

// The bases artifact (U = eigenvectors) with the given extra metadata.
Artifact bases_artifact(const CalibrationResult& result);

}  // namespace kvc::lowrank
