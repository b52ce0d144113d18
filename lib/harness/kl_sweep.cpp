#include "harness/kl_sweep.h"

#include <map>

#include "util/clock.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace kvc {
namespace {

nlohmann::json to_json(const KlWindowScore& w) {
  return {{"kl_sum", w.kl_sum},
          {"max_kl", w.max_kl},
          {"nll_reference", w.nll_reference},
          {"nll_compressed", w.nll_compressed},
          {"agreements", w.agreements},
          {"tokens", w.tokens},
          {"reference_kv_bytes", w.reference_kv_bytes},
          {"compressed_kv_bytes", w.compressed_kv_bytes},
          {"reference_window_kv_bytes", w.reference_window_kv_bytes},
          {"compressed_window_kv_bytes", w.compressed_window_kv_bytes},
          {"compressed_ram_bytes", w.compressed_ram_bytes},
          {"seconds", w.seconds}};
}

// A checkpointed window's scores; `key` names the line in the error for a record that is not one.
KlWindowScore from_json(const nlohmann::json& j, const std::string& key) {
  const auto field = [&](const char* name) -> const nlohmann::json& {
    KVC_CHECK(j.is_object() && j.contains(name) && j.at(name).is_number(),
              "checkpointed kl window '{}' has no number '{}' (delete the line or the samples file)", key, name);
    return j.at(name);
  };
  KlWindowScore w;
  w.kl_sum = field("kl_sum").get<double>();
  w.max_kl = field("max_kl").get<double>();
  w.nll_reference = field("nll_reference").get<double>();
  w.nll_compressed = field("nll_compressed").get<double>();
  w.agreements = field("agreements").get<int64_t>();
  w.tokens = field("tokens").get<int64_t>();
  w.reference_kv_bytes = field("reference_kv_bytes").get<int64_t>();
  w.compressed_kv_bytes = field("compressed_kv_bytes").get<int64_t>();
  w.reference_window_kv_bytes = field("reference_window_kv_bytes").get<int64_t>();
  w.compressed_window_kv_bytes = field("compressed_window_kv_bytes").get<int64_t>();
  // Windows checkpointed before RAM was recorded come from caches held in RAM: their RAM is their payload.
  w.compressed_ram_bytes =
      j.contains("compressed_ram_bytes") ? field("compressed_ram_bytes").get<int64_t>() : w.compressed_kv_bytes;
  w.seconds = field("seconds").get<double>();
  return w;
}

std::string checkpoint_key(const SweepCell& cell, size_t window) {
  return cell.key() + "|window " + std::to_string(window);
}

}  // namespace

KlSweepOutcome run_kl_sweep(const LlamaModel& model, const std::vector<int>& ids, const KlOptions& options,
                            const std::vector<SweepCell>& cells, const std::vector<CacheSetup>& setups,
                            ResultStore& checkpoint, const std::string& settings, bool share_prefill,
                            const std::function<void()>& on_window, const std::function<bool()>& stop) {
  const auto stopped = [&] { return stop ? stop() : interrupted(); };
  KVC_CHECK(cells.size() == setups.size(), "kl sweep: {} setups for {} cells", setups.size(), cells.size());
  check_kl_options(model, options);
  for (const CacheSetup& setup : setups) check_kl_schedule(options, setup);
  std::vector<bool> shares(setups.size());
  for (size_t c = 0; c < setups.size(); ++c) shares[c] = share_prefill && shares_prefill(setups[c], model);
  std::vector<const CacheSetup*> all_setups;
  for (const CacheSetup& setup : setups) all_setups.push_back(&setup);

  KlSweepOutcome out;
  std::vector<std::vector<KlWindowScore>> scores(cells.size());
  const auto windows = plan_windows(static_cast<int64_t>(ids.size()), options.plan);
  for (size_t w = 0; w < windows.size(); ++w) {
    if (stopped()) return out;
    const auto [begin, end] = windows[w];
    const int64_t context = kl_context_tokens(end - begin, options);
    if (context < 1 || context >= end - begin) {  // as evaluate_kl: nothing to score
      if (on_window) on_window();
      continue;
    }
    std::vector<size_t> alone, sharing;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string key = checkpoint_key(cells[c], w);
      if (const nlohmann::json* saved = checkpoint.find(key)) {
        scores[c].push_back(from_json(saved->value("record", nlohmann::json()), key));
        continue;
      }
      (shares[c] ? sharing : alone).push_back(c);
    }
    if (alone.empty() && sharing.empty()) {
      if (on_window) on_window();
      continue;
    }
    const std::vector<int> tokens(ids.begin() + begin, ids.begin() + end);
    auto start = SteadyClock::now();
    const ReferenceRun reference = run_reference(model, tokens, context, options.chunk);
    out.cost.prefill_seconds += seconds_since(start);
    ++out.cost.prefills;
    std::map<size_t, KlWindowScore> fresh;
    // Ctrl-C stops between cells: the window's finished cells are checkpointed, the rest run on resuming.
    for (size_t c : alone) {
      if (stopped()) break;
      start = SteadyClock::now();
      fresh[c] = score_kl_window(model, tokens, context, options.chunk, reference, setups[c]);
      fresh[c].seconds = seconds_since(start);
      out.cost.alone_seconds += fresh[c].seconds;
      ++out.cost.prefills;
    }
    const std::vector<int> prompt(tokens.begin(), tokens.begin() + context);
    for (const std::vector<size_t>& group : prefill_groups(all_setups, sharing, model, prompt)) {
      if (stopped()) break;
      std::vector<const CacheSetup*> shared_setups;
      for (size_t c : group) shared_setups.push_back(&setups[c]);
      start = SteadyClock::now();
      SharedPrefill prefill(model, shared_setups, prompt);
      out.cost.prefill_seconds += seconds_since(start);
      ++out.cost.prefills;
      for (size_t j = 0; j < group.size() && !stopped(); ++j) {
        start = SteadyClock::now();
        SharedPrefill::Replay r = prefill.replay(j);
        out.cost.replay_seconds += seconds_since(start);
        const auto decode_start = SteadyClock::now();
        KlWindowScorer scorer(reference, tokens, context);
        const CacheFootprint after_prefill =
            continue_schedule(model, tokens, context, options.chunk, r.cache, r.observer.get(), prefill.logits(),
                              [&](const at::Tensor& rows) { scorer.add(rows); });
        KlWindowScore& score = fresh[group[j]];
        score = scorer.finish(after_prefill);
        out.cost.decode_seconds += seconds_since(decode_start);
        score.seconds = seconds_since(start);
        ++out.cost.shared_outputs;
      }
    }
    std::vector<nlohmann::json> lines;
    for (const auto& [c, score] : fresh) {
      scores[c].push_back(score);
      lines.push_back({{"sample", checkpoint_key(cells[c], w)}, {"settings", settings}, {"record", to_json(score)}});
    }
    checkpoint.append_all(lines);
    if (fresh.size() < alone.size() + sharing.size()) return out;
    if (on_window) on_window();
  }
  for (const auto& cell_scores : scores) out.results.push_back(combine_kl_windows(cell_scores));
  out.complete = true;
  return out;
}

}  // namespace kvc
