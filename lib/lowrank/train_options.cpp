// TrainOptions::validate: values that cannot produce meaningful gates are refused before any work.
#include <cmath>

#include "lowrank/gate_training.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

constexpr int64_t kMaxBatch = 4096;
constexpr int64_t kMaxSteps = int64_t{1} << 24;

}  // namespace

void TrainOptions::validate() const {
  // NaN fails every comparison, so each check is written to pass only for good values.
  KVC_CHECK(std::isfinite(lr) && lr > 0, "--lr must be a finite number > 0, got {}", lr);
  KVC_CHECK(std::isfinite(alpha) && alpha >= 0, "--alpha must be a finite number >= 0, got {}", alpha);
  KVC_CHECK(tau > 0 && tau < 1, "--tau must be in (0, 1), got {}", tau);
  KVC_CHECK(std::isfinite(basis_lr_scale) && basis_lr_scale >= 0,
            "--basis-lr-scale must be a finite number >= 0, got {}", basis_lr_scale);
  KVC_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "--weight-decay must be a finite number >= 0, got {}",
            weight_decay);
  KVC_CHECK(std::isfinite(clip) && clip > 0, "--clip must be a finite number > 0, got {}", clip);
  KVC_CHECK(std::isfinite(init_bias), "--init-bias must be a finite number, got {}", init_bias);
  KVC_CHECK(steps >= 1, "--steps must be at least 1, got {}", steps);
  KVC_CHECK(warmup >= 0, "--warmup must be >= 0, got {}", warmup);
  KVC_CHECK(seq_len >= 2, "--ctx-size must be at least 2 tokens for training, got {}", seq_len);
  KVC_CHECK(batch >= 1, "--batch must be at least 1, got {}", batch);
  // Bounds far past any useful run, so that a typo (2^40) is refused instead of running for ever.
  KVC_CHECK(batch <= kMaxBatch, "--batch {}: at most {} windows per step", batch, kMaxBatch);
  KVC_CHECK(steps <= kMaxSteps, "--steps {}: at most {} steps", steps, kMaxSteps);
  KVC_CHECK(eval_windows <= kMaxBatch, "--eval-windows {}: at most {}", eval_windows, kMaxBatch);
  KVC_CHECK(eval_every >= 0, "--eval-every must be >= 0 (0: only at the end), got {}", eval_every);
  KVC_CHECK(eval_windows >= 1, "--eval-windows must be at least 1, got {}", eval_windows);
  KVC_CHECK(checkpoint_every >= 0, "--checkpoint-every must be >= 0, got {}", checkpoint_every);
  KVC_CHECK(stop_after >= 0, "--stop-after must be >= 0, got {}", stop_after);
  KVC_CHECK(!resume || !checkpoint.empty(), "--resume needs --checkpoint FILE");
  KVC_CHECK(!nested_shares.empty(), "--matryoshka-shares needs at least one share");
  for (double s : nested_shares)
    KVC_CHECK(std::isfinite(s) && s > 0 && s <= 1, "--matryoshka-shares: each share must be in (0, 1], got {}", s);
  KVC_CHECK(std::isfinite(eval_share) && eval_share > 0 && eval_share <= 1, "--eval-share must be in (0, 1], got {}",
            eval_share);
}

}  // namespace kvc::lowrank
