#pragma once
// What a sweep cell's method names, as the compression it builds. Besides press specs
// (NAME[:key=val,...] at the cell's ratio), a sweep's rows may be
//   retrieval/SPEC          the clustered cache on storage (--retrieval SPEC; no ratio)
//   lowrank/SPEC            a low-rank cache alone (--lowrank SPEC; its memory is set by the spec)
//   PRESS+lowrank/SPEC      a press at the cell's ratio whose kept entries are stored low-rank
#include <string>
#include <vector>

#include "compression/compression_spec.h"
#include "harness/sweep_plan.h"

namespace kvc {

std::string retrieval_cell_method(const std::string& spec);
std::string lowrank_cell_method(const std::string& spec, const std::string& press = "none");

// The cells of the extra rows for one task, in a stable order: each retrieval spec, each low-rank spec
// alone, then each press of `lowrank_presses` with each low-rank spec at each ratio > 0.
std::vector<SweepCell> extra_cells(const std::string& task, const std::vector<std::string>& retrieval,
                                   const std::vector<std::string>& lowrank, const std::vector<std::string>& lowrank_presses,
                                   const std::vector<double>& ratios);

// The compression a cell names (the grammar above).
CompressionSpec cell_compression(const SweepCell& cell);

}  // namespace kvc
