#pragma once
// What a sweep cell's method names, as the compression it builds. Besides press specs
// (NAME[:key=val,...] at the cell's ratio), a sweep's rows may be
//   retrieval/SPEC          the clustered cache on storage (--retrieval SPEC; no ratio)
//   lowrank/SPEC            a low-rank cache alone (--lowrank SPEC; its memory is set by the spec)
//   PRESS+lowrank/SPEC      a press at the cell's ratio whose kept entries are stored low-rank
//   cache/TYPE              the dense cache with keys and values stored in TYPE (f16, bf16, q8_0, q4_0)
//   PRESS+cache/TYPE        a press at the cell's ratio over the dense cache stored in TYPE
#include <string>
#include <vector>

#include "compression/compression_spec.h"
#include "harness/sweep_plan.h"

namespace kvc {

std::string retrieval_cell_method(const std::string& spec);
std::string lowrank_cell_method(const std::string& spec, const std::string& press = "none");
std::string typed_cell_method(const std::string& type, const std::string& press = "none");

// The rows a sweep adds to its presses × ratios.
struct ExtraRows {
  std::vector<std::string> retrieval;        // retrieval specs
  std::vector<std::string> lowrank;          // low-rank specs
  std::vector<std::string> lowrank_presses;  // presses combined with each low-rank spec
  std::vector<std::string> typed;            // cache types
  std::vector<std::string> typed_presses;    // presses combined with each cache type
};

// The cells of the extra rows for one task, in a stable order: each retrieval spec, each low-rank spec
// alone, each press of `lowrank_presses` with each low-rank spec at each ratio > 0, then the same for
// the cache types.
std::vector<SweepCell> extra_cells(const std::string& task, const ExtraRows& rows, const std::vector<double>& ratios);

// The compression a cell names (the grammar above).
CompressionSpec cell_compression(const SweepCell& cell);

}  // namespace kvc
