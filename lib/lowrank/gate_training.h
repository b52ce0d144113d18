#pragma once
// Training the token-wise rank gates (and the basis U) with the model frozen: the forward pass runs
// through a differentiable layer cache that applies the soft mask, x̂ = (x U ⊙ m) U^{-1}, and the loss
// is cross-entropy (or the KL divergence from the exact model) + α·R² with R the mean soft mask. Checkpoints hold
// parameters, optimizer state and the step; data windows are a pure function of (seed, step, slot), so a resumed run
// repeats the same run. Over several ranks, slot b of each step's batch is run by rank b % world and the gradients are
// added up across ranks before every update: the same global batch, and the same gates as one process
// up to the order of the additions.
#include <functional>
#include <string>
#include <vector>

#include "lowrank/lowrank_artifacts.h"
#include "model/llama_model.h"
#include "runtime/ranks.h"

namespace kvc::lowrank {

// What the gates fit besides α·R²: the paper's next-token cross-entropy, or the KL divergence from the
// exact model's next-token distribution (distillation: the gated cache learns to change the model's
// predictions as little as possible, which is what kvc-eval kl measures).
enum class TrainLoss { CrossEntropy, KlFromExact };

// What is trained: the token-wise rank gates with their basis U (the paper's), or MatryoshkaKV-style
// nested orthogonal bases without gates (nested_basis.h), written as a bases artifact.
enum class TrainTarget { Gates, NestedBasis };

struct TrainOptions {
  TrainLoss loss = TrainLoss::CrossEntropy;
  TrainTarget target = TrainTarget::Gates;
  // NestedBasis: the shares of d_kv a training window cuts each layer's K and V at (one drawn per layer,
  // K/V and window), and the share the held-out evaluations cut every layer at.
  std::vector<double> nested_shares = {0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875};
  double eval_share = 0.5;
  double alpha = 1.0;           // weight of R² in the loss
  double tau = 0.1;             // hard-mask threshold recorded for inference (and used for the hard R)
  double lr = 5e-3;             // peak learning rate of the gates (W, b)
  double basis_lr_scale = 0.1;  // U learns at lr * this
  double weight_decay = 0.0;
  double clip = 1.0;  // max global gradient norm
  int64_t steps = 200;
  int64_t warmup = 10;
  int64_t seq_len = 128;
  int64_t batch = 2;  // windows per step
  int64_t eval_every = 50;
  int64_t eval_windows = 4;
  int64_t checkpoint_every = 25;
  int64_t stop_after = 0;  // > 0: stop (checkpointed) once this step is reached, as if interrupted
  uint64_t seed = 0;
  double init_bias = 6.0;  // gate bias ramp: larger starts with higher ranks
  std::string checkpoint;  // path; empty: no checkpoints
  bool resume = false;
  bool show_progress = true;

  // Throws kvc::Error naming the flag of the first value that would train nothing or train on NaN
  // (--lr nan, --steps 0, ...). Needs no model, so tools call it before loading anything.
  void validate() const;
};

struct EvalPoint {
  int64_t step = 0;
  double train_loss = 0, heldout_ce = 0, heldout_ce_full = 0, soft_retain = 0, hard_retain = 0;
  double heldout_kl = 0;  // KL(exact ‖ gated) on the held-out windows
  double tokens_per_second = 0;
};

struct TrainResult {
  Artifact gates;  // ready to write: gates, or for TrainTarget::NestedBasis a bases artifact
  std::vector<EvalPoint> evals;
  int64_t steps_done = 0, tokens_seen = 0;
  bool finished = false;        // false: stopped early (interrupt or stop_after), checkpoint written
  bool interrupted = false;     // Ctrl-C on this rank or on any other stopped it
  double exchange_seconds = 0;  // adding up gradients and statistics across ranks, waits included (0 alone)
};

// `bases`: from kvc-calibrate (the starting U). `train_ids` windows are sampled for training; `heldout_ids` gives the
// evaluation windows. `ranks` null: this process alone. Over several ranks every rank gets the same result; only rank 0
// writes checkpoints (and reads the one to resume, sending it to the others).
TrainResult train_gates(const LlamaModel& model, const Artifact& bases, const std::vector<int>& train_ids,
                        const std::vector<int>& heldout_ids, const TrainOptions& options,
                        const std::function<void(const EvalPoint&)>& on_eval = {}, const Ranks* ranks = nullptr);

}  // namespace kvc::lowrank
