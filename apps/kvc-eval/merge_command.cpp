// kvc-eval merge: the shards of a sweep (kvc-eval sweep --shard I/N) into one result file, tables and plots.
#include <fmt/format.h>

#include <cstdio>

#include "flag_vocabulary.h"
#include "harness/sweep_report.h"
#include "harness/sweep_shards.h"
#include "subcommands.h"
#include "task_command.h"

namespace kvc::eval_app {
namespace {

struct MergeOptions {
  std::string out;
  bool allow_partial = false;
  bool json = false;
};

int run_merge(MergeOptions& o) {
  const MergedSweep merged = merge_sweep_shards(o.out, o.allow_partial);
  write_merged_results(o.out, merged.records);
  const std::vector<std::string> pngs = write_sweep_report(o.out, merged.records);
  const bool complete = merged.missing == 0;
  if (o.json) {
    const nlohmann::json summary = {{"shards", merged.shards},
                                    {"cells", merged.plan_cells},
                                    {"missing", merged.missing},
                                    {"complete", complete},
                                    {"incomplete_shards", merged.incomplete},
                                    {"results", o.out + "/results.jsonl"},
                                    {"plots", pngs}};
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("%s", sweep_markdown(merged.records).c_str());
    std::printf("merge: %d shards, %lld of %lld cells%s; wrote %s/results.{jsonl,csv,md} and %zu plots\n",
                merged.shards, static_cast<long long>(merged.plan_cells - merged.missing),
                static_cast<long long>(merged.plan_cells),
                complete ? "" : fmt::format(" (partial: {})", fmt::join(merged.incomplete, "; ")).c_str(),
                o.out.c_str(), pngs.size());
  }
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* cmd = app.add_subcommand("merge",
                                     "Merge the shards of a sweep (kvc-eval sweep --shard I/N) into one "
                                     "result file with its tables and plots");
  cmd->footer(
      "\nReads OUT/shard-I-of-N.json (each shard's plan and progress), OUT/results.jsonl and every\n"
      "OUT/results.shard-I-of-N.jsonl, checks that they belong to one sweep, and rewrites OUT/results.jsonl\n"
      "with every cell in the order one process would have run them, then OUT/results.{csv,md} and the plots.\n"
      "The shard files stay; merging again gives the same result, and an unsharded re-run resumes from it.\n\n"
      "Example:\n"
      "  scripts/ranks.sh 2 kvc-eval sweep -m data/models/stories260K --methods none,snapkv,h2o --ratios 0.5,0.9 "
      "--tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sharded --shard auto\n"
      "  kvc-eval merge --out-dir out/sharded\n");
  cli::add_out_dir(*cmd, o->out, "The sweep's result folder (shared by its shards)")->required();
  cmd->add_flag("--allow-partial", o->allow_partial,
                "Merge even if some shards have not finished (their missing cells stay empty in the tables)");
  cli::add_json_switch(*cmd, o->json, "Print a JSON summary on stdout");
  on_run(cmd, o, action, run_merge);
}

}  // namespace kvc::eval_app
