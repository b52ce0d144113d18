// kvc-eval longbench: LongBench-format JSONL data sets, prompted and scored as LongBench does.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "harness/tables.h"
#include "flag_vocabulary.h"
#include "harness_options.h"
#include "subcommands.h"
#include "task_command.h"
#include "tasks/longbench.h"
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
};

OnBadLine parse_on_bad_line(const std::string& text) {
  if (text == "skip") return OnBadLine::Skip;
  if (text == "stop") return OnBadLine::Stop;
  fail("--on-bad-line: unknown policy '{}' (use skip or stop)", text);
}

int run(Options& o) {
  const DatasetSpec& spec = dataset_spec(o.dataset);  // unknown names fail before the model loads
  const OnBadLine policy = parse_on_bad_line(o.on_bad_line);
  parse_truncation(o.harness.truncate);
  KVC_CHECK(file_exists(o.data), "-f/--file: '{}' not found (a LongBench .jsonl file)", o.data);
  const LongBenchData data = load_longbench_jsonl(o.data, policy);
  const TaskRun loaded(o);
  const CacheSetup& setup = loaded.setup;
  const DecodeOptions decode{o.max_new_tokens > 0 ? o.max_new_tokens : spec.max_new_tokens, spec.first_line_only};

  const size_t n = o.max_samples > 0 ? std::min<size_t>(data.samples.size(), static_cast<size_t>(o.max_samples))
                                     : data.samples.size();
  std::vector<SampleRecord> records;
  int64_t truncated = 0;
  Progress progress("longbench " + spec.name, static_cast<int64_t>(n), "samples", !o.json);
  for (size_t i = 0; i < n && !interrupted(); ++i) {
    const TaskSample& sample = data.samples[i];
    const PromptParts parts = split_prompt(spec.prompt_template, sample);
    records.push_back(evaluate_sample(loaded.ctx, setup, sample.id, parts.context_part, parts.question_part, sample.answers,
                                      decode, [&](const std::string& p) { return score_prediction(spec, p, sample); }));
    truncated += records.back().dropped_tokens > 0;
    progress.advance();
  }
  progress.finish();
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& r : records) samples.push_back(r.to_json());
  nlohmann::json out = {{"dataset", spec.name},
                        {"metric", spec.metric},
                        {"method", setup.name},
                        {"score", mean_score(records)},
                        {"samples_scored", records.size()},
                        {"skipped_lines", data.skipped_lines},
                        {"truncated_samples", truncated},
                        {"samples", samples},
                        {"metadata", harness_metadata(o.model, *loaded.model, {o.data}, setup.name, o.harness, loaded.seconds())}};
  out["metadata"]["on_bad_line"] = o.on_bad_line;
  out["metadata"]["complete"] = records.size() == n;
  if (!o.out.empty()) {
    ensure_out_dir(o.out);
    write_file_atomic(o.out + "/longbench_" + spec.name + ".json", out.dump(2) + "\n");
  }
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s: %s %.4f over %zu samples (%s, query-%s; %zu bad lines skipped, %lld truncated)\n",
                spec.name.c_str(), spec.metric.c_str(), mean_score(records), records.size(), setup.name.c_str(),
                o.harness.query.c_str(), data.skipped_lines, static_cast<long long>(truncated));
  }
  return task_exit_code();
}

}  // namespace

void add_longbench_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("longbench", "Score a LongBench-format JSONL data set (context, input, answers)");
  cmd->footer(fmt::format(
      "\nData sets (prompt template, metric, generation length as LongBench): {}.\n"
      "Malformed lines are reported as file:line and skipped (--on-bad-line skip) or stop the run (stop).\n"
      "Prompts longer than the model's context are refused (--truncate refuse) or cut in the middle of the\n"
      "context with a warning (--truncate middle, as LongBench).\n\n"
      "Usage with a LongBench file (the data sets are not in the repository):\n"
      "  kvc-eval longbench -m data/models/kvc-micro-lm --dataset hotpotqa -f hotpotqa.jsonl "
      "--truncate middle --max-samples 20 --json\n",
      fmt::join(longbench_dataset_names(), ", ")));
  o->add_common_to(*cmd);
  cli::add_text_file(*cmd, o->data, "LongBench .jsonl file")->required();
  cmd->add_option("--dataset", o->dataset, "Which LongBench data set the file is (prompt, metric)")->required();
  cmd->add_option("--on-bad-line", o->on_bad_line, "skip (warn with file:line and go on) or stop")
      ->capture_default_str();
  cmd->add_option("--max-samples", o->max_samples, "Score only the first N samples (0 = all)")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Override the data set's generation length");
  o->add_output_to(*cmd, "Folder for longbench_<dataset>.json", "Print one JSON object on stdout");
  on_run(cmd, o, action, run);
}

}  // namespace kvc::eval_app
