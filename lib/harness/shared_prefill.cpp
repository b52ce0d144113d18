#include "harness/shared_prefill.h"

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "harness/sample_runner.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace kvc {

// Watches an uncompressed prefill: asks every layer for the union of the methods' probes and keeps each
// layer's step. It never touches the cache.
class PrefillRecorder : public ForwardObserver {
 public:
  PrefillRecorder(std::vector<AttentionProbe> probes, std::vector<int> scoring)
      : probes_(std::move(probes)), steps_(probes_.size()), scoring_(std::move(scoring)) {}

  AttentionProbe probe(int64_t layer) const override { return probes_[static_cast<size_t>(layer)]; }
  // The setups' scoring tokens, fed after the prompt as each setup's own prefill feeds them.
  std::vector<int> scoring_tokens(const std::vector<int>&) const override { return scoring_; }
  void after_attention(const LayerStep& step, KVCache&) override { steps_[static_cast<size_t>(step.layer)] = step; }

  // Layer `layer`'s step with the statistics `probe` asks for, as a run with that probe gets them:
  // column sums and the reductions whole, the last min(window, T) probability rows. Statistics are copies, so no
  // method sees what another one did to them.
  LayerStep step_for(int64_t layer, const AttentionProbe& probe) const {
    const LayerStep& recorded = steps_[static_cast<size_t>(layer)];
    LayerStep step = recorded;
    step.stats = {};
    if (probe.column_sums) step.stats.column_sums = recorded.stats.column_sums.clone();
    if (probe.group_square_sums) step.stats.group_square_sums = recorded.stats.group_square_sums.clone();
    if (probe.column_max) step.stats.column_max = recorded.stats.column_max.clone();
    if (probe.window > 0) {
      const at::Tensor& all = recorded.stats.window_probs;
      const int64_t rows = std::min(probe.window, all.size(1));
      step.stats.window_probs = all.narrow(1, all.size(1) - rows, rows).clone();
    }
    return step;
  }

 private:
  std::vector<AttentionProbe> probes_;
  std::vector<LayerStep> steps_;
  std::vector<int> scoring_;
};

namespace {

// The tokens `observer` scores a prefill of `tokens` with (none without an observer).
std::vector<int> scoring_tokens_of(const ForwardObserver* observer, const std::vector<int>& tokens) {
  return observer == nullptr ? std::vector<int>{} : observer->scoring_tokens(tokens);
}

AttentionProbe merged(AttentionProbe a, const AttentionProbe& b) {
  a.column_sums = a.column_sums || b.column_sums;
  a.window = std::max(a.window, b.window);
  a.group_square_sums = a.group_square_sums || b.group_square_sums;
  a.column_max = a.column_max || b.column_max;
  return a;
}

}  // namespace

// A press's scoring tokens are a matter of grouping (prefill_groups), not of sharing.
bool shares_prefill(const CacheSetup& setup, const LlamaModel& model) {
  return !(setup.has_layout() && setup.shared_prefill_layout.empty()) && !setup.full_precision &&
         model.device().is_cpu();
}

std::vector<std::vector<size_t>> prefill_groups(const std::vector<const CacheSetup*>& setups,
                                                const std::vector<size_t>& indices, const LlamaModel& model,
                                                const std::vector<int>& tokens) {
  using Kind = std::tuple<CacheTypes, std::string, std::vector<int>>;
  std::vector<Kind> kinds;
  std::vector<std::vector<size_t>> groups;
  for (size_t i : indices) {
    const Kind kind{setups[i]->dense_cache_types(model), setups[i]->shared_prefill_layout,
                    scoring_tokens_of(setups[i]->new_observer().get(), tokens)};
    const auto found = std::find(kinds.begin(), kinds.end(), kind);
    if (found == kinds.end()) {
      kinds.push_back(kind);
      groups.push_back({i});
    } else {
      groups[static_cast<size_t>(found - kinds.begin())].push_back(i);
    }
  }
  return groups;
}

SharedPrefill::SharedPrefill(const LlamaModel& model, const std::vector<const CacheSetup*>& setups,
                             const std::vector<int>& tokens, const std::function<bool()>& stop)
    : tokens_(static_cast<int64_t>(tokens.size())), layers_(model.config().num_layers) {
  std::vector<AttentionProbe> probes(static_cast<size_t>(layers_));
  std::vector<int> scoring;
  for (const CacheSetup* setup : setups) {
    observers_.push_back(setup->new_observer());
    KVC_CHECK(shares_prefill(*setup, model), "compression '{}' cannot share a prefill", setup->name);
    const std::vector<int> own = scoring_tokens_of(observers_.back().get(), tokens);
    if (observers_.size() == 1) scoring = own;
    KVC_CHECK(own == scoring, "compressions '{}' and '{}' score the prompt with different tokens", setups.front()->name,
              setup->name);
    if (observers_.back() == nullptr) continue;
    for (int64_t l = 0; l < layers_; ++l) {
      probes[static_cast<size_t>(l)] = merged(probes[static_cast<size_t>(l)], observers_.back()->probe(l));
    }
  }
  recorder_ = std::make_unique<PrefillRecorder>(std::move(probes), std::move(scoring));
  const CacheTypes types = setups.empty() ? model.cache_types() : setups.front()->dense_cache_types(model);
  const std::string layout = setups.empty() ? std::string() : setups.front()->shared_prefill_layout;
  for (const CacheSetup* setup : setups) {
    KVC_CHECK(setup->dense_cache_types(model) == types, "compressions '{}' and '{}' hold different cache types",
              setups.front()->name, setup->name);
    KVC_CHECK(setup->shared_prefill_layout == layout, "compressions '{}' and '{}' store their caches differently",
              setups.front()->name, setup->name);
  }
  filled_ = std::make_unique<KVCache>(layout.empty() ? model.typed_cache(types) : setups.front()->new_cache(model));
  ForwardOptions options{false, recorder_.get()};
  options.stop = stop;
  logits_ = model.forward(tokens, *filled_, options);
}

SharedPrefill::~SharedPrefill() = default;

SharedPrefill::Replay SharedPrefill::replay(size_t i) {
  KVC_CHECK(i < observers_.size(), "shared prefill: no setup {}", i);
  Replay r{filled_->replica(0), std::move(observers_[i])};
  // The observer's turn after each layer, asked for its probe first, as in a forward pass.
  if (r.observer != nullptr) {
    for (int64_t l = 0; l < layers_; ++l)
      r.observer->after_attention(recorder_->step_for(l, r.observer->probe(l)), r.cache);
  }
  r.cache.advance(tokens_);
  return r;
}

SharedPrefillCost& SharedPrefillCost::operator+=(const SharedPrefillCost& o) {
  prefills += o.prefills;
  shared_outputs += o.shared_outputs;
  prefill_seconds += o.prefill_seconds;
  replay_seconds += o.replay_seconds;
  decode_seconds += o.decode_seconds;
  alone_seconds += o.alone_seconds;
  return *this;
}

std::vector<std::optional<SampleOutput>> run_sample_shared(const LlamaModel& model, const Tokenizer& tokenizer,
                                                           const std::vector<const CacheSetup*>& setups,
                                                           const PromptTokens& prompt, QueryMode mode,
                                                           const DecodeOptions& decode, SharedPrefillCost* cost,
                                                           const std::function<bool()>& stop, int64_t lockstep) {
  KVC_CHECK(!prompt.context.empty(), "empty prompt");
  KVC_CHECK(lockstep >= 1, "run_sample_shared: lockstep must be >= 1, got {}", lockstep);
  const auto batch = static_cast<size_t>(lockstep);
  const auto stopped = [&] { return stop && stop(); };
  SharedPrefillCost spent;
  std::vector<std::optional<SampleOutput>> outputs(setups.size());
  std::vector<size_t> sharing;
  for (size_t i = 0; i < setups.size(); ++i) {
    if (shares_prefill(*setups[i], model)) {
      sharing.push_back(i);
      continue;
    }
    if (stopped()) break;
    const auto start = SteadyClock::now();
    outputs[i] = run_sample(model, tokenizer, *setups[i], prompt, mode, decode);
    spent.alone_seconds += seconds_since(start);
    ++spent.prefills;
  }
  const bool aware = mode == QueryMode::Aware || prompt.question.empty();
  const std::vector<int> prefilled = aware ? prompt.whole() : prompt.context;
  for (const std::vector<size_t>& group : prefill_groups(setups, sharing, model, prefilled)) {
    if (stopped()) break;
    std::vector<const CacheSetup*> shared_setups;
    for (size_t i : group) shared_setups.push_back(setups[i]);
    auto start = SteadyClock::now();
    std::unique_ptr<SharedPrefill> shared;
    try {
      shared = std::make_unique<SharedPrefill>(model, shared_setups, prefilled, stop);
    } catch (const InterruptedError&) {
      break;  // stopped within the prefill: this group's setups and the later ones are left unrun
    }
    SharedPrefill& prefill = *shared;
    spent.prefill_seconds += seconds_since(start);
    ++spent.prefills;
    // The group's setups decode in lockstep, `batch` at a time (each holds its own compressed cache
    // meanwhile): each weight matrix streams once per step for all of them.
    for (size_t first = 0; first < group.size() && !stopped(); first += batch) {
      const size_t count = std::min(batch, group.size() - first);
      std::vector<SharedPrefill::Replay> replays;
      replays.reserve(count);  // no replay moves once made
      std::vector<at::Tensor> logits;
      std::vector<double> own_seconds;
      for (size_t j = first; j < first + count; ++j) {
        if (stopped()) break;
        start = SteadyClock::now();
        replays.push_back(prefill.replay(j));
        SharedPrefill::Replay& r = replays.back();
        spent.replay_seconds += seconds_since(start);
        const auto question_start = SteadyClock::now();
        logits.push_back(prefill.logits());
        if (!aware) {
          // As in run_sample: the question continues the compressed context under the context's budget.
          if (r.observer != nullptr) r.observer->hold_next_pass();
          logits.back() = model.forward(prompt.question, r.cache, ForwardOptions{false, r.observer.get()});
        }
        spent.decode_seconds += seconds_since(question_start);
        own_seconds.push_back(seconds_since(start));
      }
      if (replays.size() < count) break;  // stopped: the replayed setups run again on resuming
      std::vector<KVCache*> caches;
      std::vector<ForwardOptions> options;
      for (SharedPrefill::Replay& r : replays) {
        caches.push_back(&r.cache);
        options.push_back(ForwardOptions{false, r.observer.get()});
      }
      const auto decode_start = SteadyClock::now();
      std::vector<SampleOutput> outs =
          finish_samples_lockstep(model, tokenizer, caches, logits, prompt, decode, options);
      const double decoding = seconds_since(decode_start);
      spent.decode_seconds += decoding;
      for (size_t j = 0; j < count; ++j) {
        outs[j].seconds = own_seconds[j] + decoding / static_cast<double>(count);
        outputs[group[first + j]] = std::move(outs[j]);
        ++spent.shared_outputs;
      }
    }
  }
  if (cost != nullptr) *cost += spent;
  return outputs;
}

}  // namespace kvc
