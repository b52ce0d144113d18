// kvc-eval longbench-score: scores a LongBench prediction file (pred.py's format) as eval.py does, with
// no model: for predictions made elsewhere, or to check kvc's scorer against the official one.
#include <fmt/format.h>

#include <cstdio>

#include "flag_vocabulary.h"
#include "harness_options.h"
#include "longbench_report.h"
#include "subcommands.h"
#include "tasks/longbench_predictions.h"
#include "util/files.h"

namespace kvc::eval_app {
namespace {

struct Options {
  std::string file;
  std::string dataset;
  std::string on_bad_line = "stop";
  bool length_buckets = false;
  bool json = false;
};

int run(Options& o) {
  // eval.py names the data set after the file ("hotpotqa.jsonl"); pred files carry no "dataset" field.
  const DatasetSpec& spec = dataset_spec(o.dataset.empty() ? detect_longbench_dataset(o.file) : o.dataset);
  const LongBenchPredictions data = load_longbench_predictions(o.file, parse_on_bad_line(o.on_bad_line));
  KVC_CHECK(!data.samples.empty(), "{}: no predictions to score", o.file);
  std::vector<double> scores;
  for (size_t i = 0; i < data.samples.size(); ++i) {
    scores.push_back(score_prediction(spec, data.predictions[i], data.samples[i]));
  }
  nlohmann::json out = longbench_summary(spec, scores, o.length_buckets ? &data.records : nullptr);
  out["file"] = o.file;
  out["skipped_lines"] = data.skipped_lines;
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s\n", describe_longbench_score(out).c_str());
  }
  return 0;
}

}  // namespace

void add_longbench_score_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "longbench-score", "Score LongBench predictions (pred.py's .jsonl: pred, answers, all_classes, length)");
  cmd->footer(
      "\nScores as LongBench's eval.py: first line only for trec, triviaqa, samsum and lsht, the best answer per\n"
      "prediction, 100 x mean rounded to 2 decimals; --length-buckets as eval.py --e (LongBench-E).\n"
      "The data set comes from the file name (hotpotqa.jsonl) unless --dataset names it.\n\n"
      "Example (predictions written by kvc-eval longbench --out-dir):\n"
      "  kvc-eval longbench-score -f data/reference/longbench_eval/pred/hotpotqa.jsonl\n");
  cli::add_text_file(*cmd, o->file, "Predictions .jsonl (LongBench's pred format)")->required();
  cmd->add_option("--dataset", o->dataset, "Which LongBench data set the predictions are for (default: the file name)");
  add_on_bad_line_option(*cmd, o->on_bad_line);
  cmd->add_flag("--length-buckets", o->length_buckets, "Also score LongBench-E's length buckets (0-4k, 4-8k, 8k+)");
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout");
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

}  // namespace kvc::eval_app
