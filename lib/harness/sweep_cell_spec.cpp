#include "harness/sweep_cell_spec.h"

namespace kvc {
namespace {

const std::string kRetrievalPrefix = "retrieval/";
const std::string kLowRankPrefix = "lowrank/";
const std::string kLowRankJoin = "+lowrank/";
const std::string kTypedPrefix = "cache/";
const std::string kTypedJoin = "+cache/";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string joined_method(const std::string& prefix, const std::string& join, const std::string& spec,
                          const std::string& press) {
  return press == "none" || press.empty() ? prefix + spec : press + join + spec;
}

// Each spec alone, then each press (but none) with each spec at each ratio > 0.
void add_rows(const std::string& task, const std::vector<std::string>& specs, const std::vector<std::string>& presses,
              const std::vector<double>& ratios, const std::string& prefix, const std::string& join,
              std::vector<SweepCell>& cells) {
  for (const auto& spec : specs) cells.push_back({task, joined_method(prefix, join, spec, "none"), 0});
  for (const auto& press : presses) {
    if (method_name(press) == "none") continue;
    for (const auto& spec : specs)
      for (double r : ratios)
        if (r > 0) cells.push_back({task, joined_method(prefix, join, spec, press), r});
  }
}

}  // namespace

std::string retrieval_cell_method(const std::string& spec) { return kRetrievalPrefix + spec; }

std::string lowrank_cell_method(const std::string& spec, const std::string& press) {
  return joined_method(kLowRankPrefix, kLowRankJoin, spec, press);
}

std::string typed_cell_method(const std::string& type, const std::string& press) {
  return joined_method(kTypedPrefix, kTypedJoin, type, press);
}

std::vector<SweepCell> extra_cells(const std::string& task, const ExtraRows& rows, const std::vector<double>& ratios) {
  std::vector<SweepCell> cells;
  for (const auto& spec : rows.retrieval) cells.push_back({task, retrieval_cell_method(spec), 0});
  add_rows(task, rows.lowrank, rows.lowrank_presses, ratios, kLowRankPrefix, kLowRankJoin, cells);
  add_rows(task, rows.typed, rows.typed_presses, ratios, kTypedPrefix, kTypedJoin, cells);
  return cells;
}

CompressionSpec cell_compression(const SweepCell& cell) {
  CompressionSpec spec;
  const std::string& m = cell.method;
  if (starts_with(m, kRetrievalPrefix)) {
    spec.retrieval = m.substr(kRetrievalPrefix.size());
  } else if (starts_with(m, kLowRankPrefix)) {
    spec.lowrank_file = m.substr(kLowRankPrefix.size());
  } else if (starts_with(m, kTypedPrefix)) {
    spec.cache_type = m.substr(kTypedPrefix.size());
  } else if (const size_t join = m.find(kLowRankJoin); join != std::string::npos) {
    spec.press = m.substr(0, join);
    spec.ratio = cell.ratio;
    spec.lowrank_file = m.substr(join + kLowRankJoin.size());
  } else if (const size_t typed = m.find(kTypedJoin); typed != std::string::npos) {
    spec.press = m.substr(0, typed);
    spec.ratio = cell.ratio;
    spec.cache_type = m.substr(typed + kTypedJoin.size());
  } else {
    spec.press = m;
    spec.ratio = cell.ratio;
  }
  return spec;
}

}  // namespace kvc
