// kvc-eval longbench: LongBench's JSONL data sets as distributed, prompted, truncated and scored as
// LongBench's pred.py and eval.py do.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "flag_vocabulary.h"
#include "harness/tables.h"
#include "harness_options.h"
#include "longbench_report.h"
#include "subcommands.h"
#include "task_command.h"
#include "tasks/longbench.h"
#include "tasks/longbench_predictions.h"
#include "util/files.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc::eval_app {
namespace {

struct Options : TaskCommandOptions {
  std::string data;
  std::string dataset;
  std::string on_bad_line = "skip";
  int64_t max_samples = 0;
  int64_t max_new_tokens = 0;
  int64_t max_length = 0;
  bool length_buckets = false;
};

int run(Options& o) {
  // Everything about the data is checked before the model loads.
  KVC_CHECK(file_exists(o.data), "-f/--file: '{}' not found (a LongBench .jsonl file)", o.data);
  const DatasetSpec& spec = dataset_spec(o.dataset.empty() ? detect_longbench_dataset(o.data) : o.dataset);
  const OnBadLine policy = parse_on_bad_line(o.on_bad_line);
  parse_truncation(o.harness.truncate);
  KVC_CHECK(o.max_length >= 0, "--max-length: {} is negative (0: the model's context less the generation length)",
            o.max_length);
  const LongBenchData data = load_longbench_jsonl(o.data, policy, &spec);
  const TaskRun loaded(o);
  const CacheSetup& setup = loaded.setup;
  EvalContext ctx = loaded.ctx;
  ctx.max_prompt_tokens = o.max_length;
  // The first-line sets are cut at their first line anyway, so decoding stops there.
  const DecodeOptions decode{o.max_new_tokens > 0 ? o.max_new_tokens : spec.max_new_tokens, spec.first_line_only};

  const size_t n = o.max_samples > 0 ? std::min<size_t>(data.samples.size(), static_cast<size_t>(o.max_samples))
                                     : data.samples.size();
  std::vector<SampleRecord> records;
  std::string predictions;
  int64_t truncated = 0;
  Progress progress("longbench " + spec.name, static_cast<int64_t>(n), "samples", !o.json);
  for (size_t i = 0; i < n && !interrupted(); ++i) {
    const TaskSample& sample = data.samples[i];
    const PromptParts parts = split_prompt(spec.prompt_template, sample);
    records.push_back(evaluate_sample(ctx, setup, sample.id, parts.context_part, parts.question_part, sample.answers,
                                      decode, [&](const std::string& p) { return score_prediction(spec, p, sample); }));
    predictions += longbench_prediction_line(records.back().prediction, sample, data.records[i]) + "\n";
    truncated += records.back().dropped_tokens > 0;
    progress.advance();
  }
  progress.finish();
  std::vector<double> scores;
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& r : records) {
    scores.push_back(r.score);
    samples.push_back(r.to_json());
  }
  nlohmann::json out = longbench_summary(spec, scores, o.length_buckets ? &data.records : nullptr);
  out["method"] = setup.name;
  out["samples_scored"] = records.size();
  out["skipped_lines"] = data.skipped_lines;
  out["truncated_samples"] = truncated;
  out["samples"] = samples;
  out["metadata"] = harness_metadata(o.model, *loaded.model, {o.data}, setup.name, o.harness, loaded.seconds());
  out["metadata"]["on_bad_line"] = o.on_bad_line;
  out["metadata"]["max_length"] = o.max_length;
  out["metadata"]["complete"] = records.size() == n;
  if (!o.out.empty()) {
    ensure_out_dir(o.out);
    write_file_atomic(o.out + "/longbench_" + spec.name + ".json", out.dump(2) + "\n");
    write_file_atomic(o.out + "/" + spec.name + ".jsonl", predictions);
  }
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s (%s, query-%s; %zu bad lines skipped, %lld truncated)\n", describe_longbench_score(out).c_str(),
                setup.name.c_str(), o.harness.query.c_str(), data.skipped_lines, static_cast<long long>(truncated));
  }
  return task_exit_code();
}

}  // namespace

void add_longbench_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("longbench", "Run and score a LongBench data set (its .jsonl file as distributed)");
  cmd->footer(fmt::format(
      "\nData sets (LongBench v1; prompt template, metric and generation length as its config and eval.py):\n  {}.\n"
      "The data set is taken from the records' \"dataset\" field or the file name unless --dataset names it;\n"
      "a file of another data set is refused. Malformed lines are reported as file:line and skipped\n"
      "(--on-bad-line skip) or stop the run (stop). Prompts longer than --max-length tokens (LongBench's\n"
      "max_length, e.g. 3500 for a 4K model; default: the model's context less the generation length) are\n"
      "refused (--truncate refuse) or cut in the middle as LongBench does (--truncate middle).\n"
      "The score is printed as eval.py prints it (100 x mean, 2 decimals); --length-buckets adds LongBench-E's\n"
      "0-4k / 4-8k / 8k+ scores. --out-dir writes longbench_<set>.json and <set>.jsonl, the predictions in\n"
      "LongBench's pred format (kvc-eval longbench-score or LongBench's eval.py score them).\n\n"
      "Example (a LongBench-format passage_count file built from the repository's essays; LongBench's own\n"
      "files, from its release, are read the same way):\n"
      "  kvc-eval longbench -m data/models/kvc-micro-lm -f data/text/longbench/passage_count.jsonl --out-dir lb\n"
      "  kvc-eval longbench-score -f lb/passage_count.jsonl --length-buckets\n",
      fmt::join(longbench_dataset_names(), ", ")));
  o->add_common_to(*cmd);
  cli::add_text_file(*cmd, o->data, "LongBench .jsonl file")->required();
  cmd->add_option("--dataset", o->dataset, "Which LongBench data set the file is (default: from the file)");
  add_on_bad_line_option(*cmd, o->on_bad_line);
  cmd->add_option("--max-samples", o->max_samples, "Score only the first N samples (0 = all)")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Override the data set's generation length");
  cmd->add_option("--max-length", o->max_length,
                  "Prompt tokens kept before --truncate acts (LongBench's max_length; 0: the model's context less "
                  "the generation length)")
      ->capture_default_str();
  cmd->add_flag("--length-buckets", o->length_buckets,
                "Also score LongBench-E's length buckets (0-4k, 4-8k, 8k+) from the records' \"length\"");
  o->add_output_to(*cmd, "Folder for longbench_<dataset>.json and <dataset>.jsonl (predictions)",
                   "Print one JSON object on stdout");
  on_run(cmd, o, action, run);
}

}  // namespace kvc::eval_app
