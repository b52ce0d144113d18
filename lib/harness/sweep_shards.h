#pragma once
// A sweep split into shards that run anywhere (ranks of torchrun or Slurm, a Slurm array, a shell
// loop) with no exchange between them: shard i of n runs the plan's cells whose index is i mod n and
// appends them to its own result file in the shared output folder; a merge puts every shard's cells
// back in plan order into results.jsonl, so the tables and plots are those of one process.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kvc {

struct SweepShard {
  int index = 0, count = 1;  // count 1: not sharded

  bool sharded() const { return count > 1; }
  bool owns(size_t cell_index) const { return static_cast<int>(cell_index % static_cast<size_t>(count)) == index; }
  // "results.shard-I-of-N.jsonl" and "shard-I-of-N.json" (the shard's plan and progress).
  std::string results_name() const;
  std::string status_name() const;
};

// "I/N" (0 <= I < N), or "auto": the rank and world size of torchrun (RANK, WORLD_SIZE) or Slurm
// (SLURM_PROCID, SLURM_NTASKS), else a Slurm array's task (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of
// SLURM_ARRAY_TASK_COUNT). Malformed values, or a launcher that started one process, are a kvc::Error
// naming --shard.
SweepShard parse_sweep_shard(const std::string& text);

// What a shard writes beside its results, so that a merge knows the whole plan and what is missing.
struct ShardStatus {
  SweepShard shard;
  std::string settings;           // the sweep's settings hash (same for every shard of one sweep)
  std::vector<std::string> plan;  // every cell key of the whole sweep, in plan order
  int64_t done = 0, owned = 0;    // this shard's finished cells, and how many it has
};

void write_shard_status(const std::string& dir, const ShardStatus& status);

struct MergedSweep {
  std::vector<nlohmann::json> records;  // plan order, then cells of earlier plans in file order
  int shards = 0;
  int64_t plan_cells = 0, missing = 0;  // plan cells with no result yet
  std::vector<std::string> incomplete;  // "shard I of N: D of M cells"
};

// Reads `dir`'s shard status files, results.jsonl and every shard's results; checks that they belong
// to one sweep (same shard count, settings and plan; a kvc::Error names the file that does not);
// returns the records in plan order. With `allow_partial` false, a shard that has not started or not
// finished is a kvc::Error that says which and how to resume it.
MergedSweep merge_sweep_shards(const std::string& dir, bool allow_partial);

// Replaces dir/results.jsonl by `records` (atomically), so that later runs and merges resume from it.
void write_merged_results(const std::string& dir, const std::vector<nlohmann::json>& records);

}  // namespace kvc
