// kvc-eval report: the tables and plots of a sweep folder, rewritten from its results.jsonl.
#include <cstdio>

#include "flag_vocabulary.h"
#include "harness/result_store.h"
#include "harness/sweep_report.h"
#include "subcommands.h"
#include "task_command.h"
#include "util/error.h"
#include "util/files.h"
#include "util/output_lock.h"

namespace kvc::eval_app {
namespace {

struct ReportOptions {
  std::string out;
  bool json = false;
};

int run_report(ReportOptions& o) {
  const std::string results = o.out + "/results.jsonl";
  KVC_CHECK(file_exists(results),
            "--out-dir: '{}' has no results.jsonl; run kvc-eval sweep --out-dir {} first (a "
            "sharded sweep: kvc-eval merge)",
            o.out, o.out);
  // The sweep that writes this folder holds the same lock: a report never reads a file being appended.
  const OutputLock lock(o.out, "results.jsonl", "--out-dir");
  const ResultStore store(results);
  KVC_CHECK(!store.records().empty(), "--out-dir: '{}' holds no finished cell yet", results);
  const std::vector<std::string> pngs = write_sweep_report(o.out, store.records());
  if (o.json) {
    const nlohmann::json summary = {{"cells", store.records().size()}, {"results", results}, {"plots", pngs}};
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("%s", sweep_markdown(store.records()).c_str());
    std::printf("report: %zu cells; wrote %s/results.{csv,md} and %zu plots\n", store.records().size(), o.out.c_str(),
                pngs.size());
  }
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand("report", "Rewrite a sweep's tables and plots from its results.jsonl");
  cmd->footer(
      "\nReads OUT/results.jsonl (the cells a kvc-eval sweep finished, complete or not) and rewrites\n"
      "OUT/results.{csv,md} and the plots, as the sweep writes them at its end: after a sweep was\n"
      "stopped, or to redraw the tables of results made by an older kvc. The results file is not changed\n"
      "(but a torn last line, left by a killed sweep, is cut off as the sweep's resume would).\n\n"
      "Example:\n"
      "  kvc-eval sweep -m data/models/stories260K --methods none,snapkv --ratios 0.5 --tasks kl "
      "-f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sweep\n"
      "  kvc-eval report --out-dir out/sweep\n");
  cli::add_out_dir(*cmd, o->out, "The sweep's result folder")->required();
  cli::add_json_switch(*cmd, o->json, "Print a JSON summary on stdout");
  on_run(cmd, o, action, run_report);
}

}  // namespace kvc::eval_app
