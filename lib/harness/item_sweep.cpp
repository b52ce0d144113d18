#include "harness/item_sweep.h"

#include <map>

#include "util/error.h"
#include "util/interrupt.h"

namespace kvc {

nlohmann::json sampled_cell_result(const std::string& task, const std::vector<TaskItem>& items,
                                   const std::vector<SampleRecord>& records) {
  KVC_CHECK(items.size() == records.size(), "cell of {}: {} records for {} samples", task, records.size(),
            items.size());
  std::vector<nlohmann::json> groups;
  std::vector<std::vector<SampleRecord>> members;
  double ratio = 0, ram_ratio = 0;
  nlohmann::json samples = nlohmann::json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    size_t g = 0;
    while (g < groups.size() && groups[g] != items[i].group) ++g;
    if (g == groups.size()) {
      groups.push_back(items[i].group);
      members.emplace_back();
    }
    members[g].push_back(records[i]);
    ratio += records[i].compression_ratio;
    ram_ratio += records[i].ram_ratio;
    samples.push_back(records[i].to_json());
  }
  const bool needle = task == "needle";
  nlohmann::json detail = nlohmann::json::array();
  for (size_t g = 0; g < groups.size(); ++g) {
    nlohmann::json d = groups[g];
    d[needle ? "accuracy" : "score"] = mean_score(members[g]);
    detail.push_back(d);
  }
  return {{"score", mean_score(records)},
          {"metric", needle ? "accuracy" : "string_match"},
          {"higher_is_better", true},
          {"compression_ratio", records.empty() ? 0.0 : ratio / static_cast<double>(records.size())},
          {"ram_ratio", records.empty() ? 0.0 : ram_ratio / static_cast<double>(records.size())},
          {"cells", detail},
          {"samples", samples}};
}

ItemSweepOutcome run_item_sweep(const EvalContext& ctx, const std::vector<TaskItem>& items,
                                const std::vector<SweepCell>& cells, const std::vector<CacheSetup>& setups,
                                ResultStore& checkpoint, const std::string& settings, bool share_prefill,
                                const std::function<void()>& on_item) {
  KVC_CHECK(cells.size() == setups.size(), "item sweep: {} setups for {} cells", setups.size(), cells.size());
  ItemSweepOutcome out;
  out.records.resize(cells.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (interrupted()) return out;
    std::vector<size_t> to_run;
    std::vector<const CacheSetup*> run_setups;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (const nlohmann::json* saved = checkpoint.find(cells[c].key() + "|" + std::to_string(i))) {
        out.records[c].push_back(SampleRecord::from_json(saved->at("record")));
        ++out.samples_reused;
        continue;
      }
      to_run.push_back(c);
      run_setups.push_back(&setups[c]);
      out.records[c].emplace_back();  // filled below
    }
    if (!to_run.empty()) {
      // Ctrl-C stops between cells: the cells of this item that finished are checkpointed, the rest run
      // when the sweep is resumed.
      const auto stop = [] { return interrupted(); };
      std::vector<std::optional<SampleRecord>> fresh;
      if (share_prefill) {
        fresh = evaluate_item_shared(ctx, run_setups, items[i], &out.cost, stop);
      } else {
        for (const CacheSetup* setup : run_setups)
          fresh.push_back(stop() ? std::nullopt : std::optional<SampleRecord>(evaluate_item(ctx, *setup, items[i])));
      }
      std::vector<nlohmann::json> lines;
      for (size_t j = 0; j < to_run.size(); ++j) {
        if (!fresh[j]) continue;
        out.records[to_run[j]].back() = *fresh[j];
        lines.push_back({{"sample", cells[to_run[j]].key() + "|" + std::to_string(i)},
                         {"settings", settings},
                         {"record", fresh[j]->to_json()}});
      }
      checkpoint.append_all(lines);
      if (lines.size() < to_run.size()) return out;
      ++out.samples_run;
    }
    if (on_item) on_item();
  }
  out.complete = true;
  return out;
}

}  // namespace kvc
