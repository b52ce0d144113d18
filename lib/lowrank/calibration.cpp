#include "lowrank/calibration.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>

#include "runtime/interrupt_poll.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc::lowrank {
namespace {

// Sees each layer's new pre-RoPE keys and values right after its attention, and rotates the keys to
// their positions for the rotated keys' basis.
class StateCollector : public ForwardObserver {
 public:
  StateCollector(std::shared_ptr<const Rope> rope, std::vector<SecondMoment>& k, std::vector<SecondMoment>& v,
                 std::vector<SecondMoment>& rotated_k)
      : rope_(std::move(rope)), k_(k), v_(v), rotated_k_(rotated_k) {}
  void after_attention(const LayerStep& step, KVCache&) override {
    const int64_t T = step.keys.size(1);
    const auto flat = [T](const at::Tensor& heads) { return heads.transpose(0, 1).reshape({T, -1}); };
    k_[step.layer].add(flat(step.keys));
    v_[step.layer].add(flat(step.values));
    rotated_k_[step.layer].add(flat(rope_->apply(step.keys, step.positions)));
  }

 private:
  std::shared_ptr<const Rope> rope_;
  std::vector<SecondMoment>& k_;
  std::vector<SecondMoment>& v_;
  std::vector<SecondMoment>& rotated_k_;
};

}  // namespace

CalibrationResult calibrate(const LlamaModel& model, const std::vector<int>& ids, const CalibrationOptions& options,
                            const Ranks* ranks) {
  const Ranks alone;
  const Ranks& r = ranks != nullptr ? *ranks : alone;
  const ModelConfig& c = model.config();
  KVC_CHECK(options.seq_len >= 2 && options.seq_len <= c.max_position_embeddings,
            "--seq-len must be in 2..{} (the model's context), got {}", c.max_position_embeddings, options.seq_len);
  KVC_CHECK(options.tokens > 0, "--tokens must be > 0, got {}", options.tokens);
  const int64_t total = std::min<int64_t>(options.tokens, static_cast<int64_t>(ids.size()));
  KVC_CHECK(total >= 2, "--data: calibration text has only {} tokens", ids.size());
  // One accumulator each (copies of one would share a tensor).
  std::vector<SecondMoment> k, v, rotated_k;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    k.emplace_back(c.kv_dim());
    v.emplace_back(c.kv_dim());
    rotated_k.emplace_back(c.kv_dim());
  }
  StateCollector collector(model.rope(), k, v, rotated_k);
  ForwardOptions fo;
  fo.all_logits = false;
  fo.observer = &collector;
  // Each rank shows its own share: the root's bar tracks the slowest part of the job closely enough.
  int64_t mine = 0;
  for (int64_t t0 = 0, w = 0; t0 < total; t0 += options.seq_len, ++w) {
    if (w % r.world() == r.rank()) mine += std::min(options.seq_len, total - t0);
  }
  Progress progress("calibrate", mine, "tok", options.show_progress && r.is_root());
  at::NoGradGuard no_grad;
  // Each round of windows (one per rank) may begin with a check that no rank was interrupted, so a
  // Ctrl-C on any rank stops all of them within a fraction of a second, not at the end.
  InterruptPoll poll(r);
  for (int64_t t0 = 0, w = 0; t0 < total; t0 += options.seq_len, ++w) {
    if (w % r.world() == 0 && poll.stop()) break;
    if (w % r.world() != r.rank()) continue;
    const int64_t n = std::min(options.seq_len, total - t0);
    std::vector<int> window(ids.begin() + t0, ids.begin() + t0 + n);
    KVCache cache = model.new_cache();
    model.forward(window, cache, fo);
    progress.advance(n);
  }
  progress.finish();
  const auto exchange_start = std::chrono::steady_clock::now();
  // Every rank learns whether any was interrupted, so none waits for a sum that will not come.
  at::Tensor stopped = at::tensor({interrupted() ? 1.0 : 0.0}, at::kDouble);
  at::Tensor counts = at::tensor({static_cast<double>(k[0].count())}, at::kDouble);
  std::vector<at::Tensor> flags = {stopped, counts};
  r.sum(flags);
  if (stopped.item<double>() != 0) throw InterruptedError("calibration interrupted; nothing written");
  std::vector<at::Tensor> sums;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    sums.push_back(k[l].sum());
    sums.push_back(v[l].sum());
    sums.push_back(rotated_k[l].sum());
  }
  r.sum(sums);
  const auto tokens = static_cast<int64_t>(counts.item<double>());
  CalibrationResult result;
  result.tokens = tokens;
  result.exchange_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_start).count();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    k[l].set_count(tokens);
    v[l].set_count(tokens);
    rotated_k[l].set_count(tokens);
    result.keys.push_back(eigen_basis(k[l].matrix()));
    result.values.push_back(eigen_basis(v[l].matrix()));
    result.rotated_keys.push_back(eigen_basis(rotated_k[l].matrix()));
  }
  return result;
}

Artifact bases_artifact(const CalibrationResult& result) {
  Artifact a;
  a.kind = kBasesKind;
  for (size_t l = 0; l < result.keys.size(); ++l) {
    LayerBasis b;
    b.key.U = result.keys[l].eigenvectors.to(at::kFloat);
    b.key.eigenvalues = result.keys[l].eigenvalues;
    b.value.U = result.values[l].eigenvectors.to(at::kFloat);
    b.value.eigenvalues = result.values[l].eigenvalues;
    b.rotated_key.U = result.rotated_keys[l].eigenvectors.to(at::kFloat);
    b.rotated_key.eigenvalues = result.rotated_keys[l].eigenvalues;
    a.layers.push_back(b);
  }
  a.metadata["tokens"] = std::to_string(result.tokens);
  a.metadata["mean_centred"] = "false";
  return a;
}

}  // namespace kvc::lowrank
