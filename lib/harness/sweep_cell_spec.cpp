#include "harness/sweep_cell_spec.h"

namespace kvc {
namespace {

const std::string kRetrievalPrefix = "retrieval/";
const std::string kLowRankPrefix = "lowrank/";
const std::string kLowRankJoin = "+lowrank/";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

std::string retrieval_cell_method(const std::string& spec) { return kRetrievalPrefix + spec; }

std::string lowrank_cell_method(const std::string& spec, const std::string& press) {
  return press == "none" || press.empty() ? kLowRankPrefix + spec : press + kLowRankJoin + spec;
}

std::vector<SweepCell> extra_cells(const std::string& task, const std::vector<std::string>& retrieval,
                                   const std::vector<std::string>& lowrank, const std::vector<std::string>& lowrank_presses,
                                   const std::vector<double>& ratios) {
  std::vector<SweepCell> cells;
  for (const auto& spec : retrieval) cells.push_back({task, retrieval_cell_method(spec), 0});
  for (const auto& spec : lowrank) cells.push_back({task, lowrank_cell_method(spec), 0});
  for (const auto& press : lowrank_presses) {
    if (method_name(press) == "none") continue;
    for (const auto& spec : lowrank)
      for (double r : ratios)
        if (r > 0) cells.push_back({task, lowrank_cell_method(spec, press), r});
  }
  return cells;
}

CompressionSpec cell_compression(const SweepCell& cell) {
  CompressionSpec spec;
  const std::string& m = cell.method;
  if (starts_with(m, kRetrievalPrefix)) {
    spec.retrieval = m.substr(kRetrievalPrefix.size());
  } else if (starts_with(m, kLowRankPrefix)) {
    spec.lowrank_file = m.substr(kLowRankPrefix.size());
  } else if (const size_t join = m.find(kLowRankJoin); join != std::string::npos) {
    spec.press = m.substr(0, join);
    spec.ratio = cell.ratio;
    spec.lowrank_file = m.substr(join + kLowRankJoin.size());
  } else {
    spec.press = m;
    spec.ratio = cell.ratio;
  }
  return spec;
}

}  // namespace kvc
