#pragma once
// LU-KV's offline profiling (Tang et al. 2026, arXiv:2602.08585) for `kvc-profile --lukv-press`: over windows
// of profiling text, each a context of `context` tokens followed by `horizon` tokens that stand for the
// decoding to come, it measures per layer × KV head how much long-horizon utility a budget keeps when the
// head keeps its context entries in the order of a press's scores, and turns the mean curves into the
// budget curve the `lukv` press reads (lukv_allocation.h).
//
// Oracle importance of context entry j in KV head h: max over the horizon's queries k and over h's query
// heads i of A[i, k, j] · ‖W_o,i v_j‖₂ (the largest contribution the entry makes to the attention output of
// a future token, with full attention). The press's scores are those it computes on the context alone,
// with the `sink` oldest and `recent` newest entries protected as the lukv press protects them.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/llama_model.h"

namespace kvc {

struct LukvProfileOptions {
  std::string press;      // the scorer whose ranking is profiled, e.g. "expected_attention" or "snapkv:window=16"
  int64_t context = 256;  // context tokens per window
  int64_t horizon = 128;  // tokens after the context whose attention defines the oracle importance
  int64_t windows = 4;
  int64_t sink = 4, recent = 1;  // kvpress' LUKVPress defaults
  int64_t grid = 100;            // budget units per head
  bool show_progress = true;

  // Throws kvc::Error naming the flag of the first value that cannot make a curve. Needs no model.
  void validate() const;
};

struct LukvProfile {
  at::Tensor utility;           // [L, KV, grid + 1] mean share of the oracle mass kept at each budget (press layers)
  at::Tensor prune;             // [99, L, KV] share of each head's entries pruned at compression ratio (row + 1) / 100
  std::vector<int64_t> layers;  // the model layer of each press layer (a sliding-window model's global ones)
  int64_t windows = 0;
};

LukvProfile profile_lukv(const LlamaModel& model, const std::vector<int>& ids, const LukvProfileOptions& options);

}  // namespace kvc
