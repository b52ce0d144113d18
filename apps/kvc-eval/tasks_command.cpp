// kvc-eval tasks: RULER-style synthetic long-context tasks generated with a seed.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "harness/sweep_plan.h"
#include "harness/tables.h"
#include "flag_vocabulary.h"
#include "harness_options.h"
#include "subcommands.h"
#include "task_command.h"
#include "tasks/haystack.h"
#include "tasks/synthetic.h"
#include "util/files.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc::eval_app {
namespace {

struct Options : TaskCommandOptions {
  std::string tasks = "niah_single";
  std::string lengths = "256";
  std::string haystack;
  int samples = 5;
  int64_t max_new_tokens = 48;
};

int run(Options& o) {
  if (o.tasks == "all") o.tasks = fmt::format("{}", fmt::join(synthetic_task_names(), ","));
  const std::vector<std::string> tasks = split_list(o.tasks);
  check_task_names(tasks, synthetic_task_names());  // before the model loads
  const std::vector<int64_t> lengths = parse_int_list(o.lengths, "--lengths");
  KVC_CHECK(o.samples >= 1, "--samples must be >= 1, got {}", o.samples);
  const TaskRun loaded(o);
  const CacheSetup& setup = loaded.setup;
  const std::vector<std::string> files = o.haystack.empty() ? std::vector<std::string>{} : haystack_files(o.haystack);
  const std::string haystack = files.empty() ? "" : load_haystack(files);
  const DecodeOptions decode{o.max_new_tokens, true};

  Table table{{"task", "length", "samples", "score"}, {}};
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> failed;
  // Everything finished so far, written again after each task so a later failure or Ctrl-C keeps it.
  const auto report = [&] {
    nlohmann::json out = {{"method", setup.name},
                          {"results", results},
                          {"failed_tasks", failed},
                          {"metadata", harness_metadata(o.model, *loaded.model, files, setup.name, o.harness, loaded.seconds())}};
    out["metadata"]["complete"] = !interrupted() && failed.empty();
    if (!o.out.empty()) {
      write_file_atomic(o.out + "/tasks.json", out.dump(2) + "\n");
      write_file_atomic(o.out + "/tasks.csv", to_csv(table));
      write_file_atomic(o.out + "/tasks.md", to_markdown(table));
    }
    return out;
  };
  if (!o.out.empty()) ensure_out_dir(o.out);
  Progress progress("tasks", static_cast<int64_t>(tasks.size() * lengths.size()) * o.samples, "samples", !o.json);
  for (const auto& task : tasks) {
    try {
      for (int64_t length : lengths) {
        if (interrupted()) break;
        std::vector<SampleRecord> records;
        for (int s = 0; s < o.samples && !interrupted(); ++s) {
          // One sample at a time, so the bar moves and Ctrl-C stops between samples.
          auto one = run_synthetic_cell(loaded.ctx, setup, task, length, 1, sample_seed(o.harness.seed, std::to_string(s)),
                                        haystack, decode);
          one.front().id = fmt::format("{}-{}tok-{}", task, length, s);
          records.push_back(one.front());
          progress.advance();
        }
        nlohmann::json samples = nlohmann::json::array();
        for (const auto& r : records) samples.push_back(r.to_json());
        results.push_back({{"task", task}, {"length", length}, {"score", mean_score(records)}, {"samples", samples}});
        table.rows.push_back({task, std::to_string(length), std::to_string(records.size()),
                              format_number(mean_score(records), 4)});
      }
    } catch (const kvc::Error& e) {
      // One task that cannot run (e.g. too long for this model) must not cost the others their results.
      failed.push_back(task);
      std::fprintf(stderr, "kvc-eval: error: tasks: %s (the other tasks go on)\n", e.what());
    }
    report();
  }
  progress.finish();
  const nlohmann::json out = report();
  if (o.json) std::printf("%s\n", out.dump().c_str());
  else std::printf("%s(%s, query-%s)\n", to_markdown(table).c_str(), setup.name.c_str(), o.harness.query.c_str());
  return task_exit_code(!failed.empty());
}

}  // namespace

void add_tasks_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tasks", "RULER-style synthetic tasks (multi-key/value/query needles, variable "
                                              "tracking, common/frequent words)");
  cmd->footer(fmt::format(
      "\nTasks: {}.\nEach sample is generated from --seed; scores are the share of required answers found in the\n"
      "prediction (RULER string match), averaged over samples. A task that fails (e.g. a length too short for\n"
      "it) is reported on stderr and the others go on; the exit status is then 1.\n\nExamples:\n"
      "  kvc-eval tasks -m data/models/stories260K --tasks niah_single,variable_tracking --lengths 448 --samples 2\n"
      "  kvc-eval tasks -m data/models/kvc-micro-lm --tasks all --lengths 512 --samples 1 --query agnostic --json\n",
      fmt::join(synthetic_task_names(), ", ")));
  o->add_common_to(*cmd);
  cmd->add_option("--tasks", o->tasks, "Comma-separated task names, or all")->capture_default_str();
  cmd->add_option("--lengths", o->lengths, "Prompt lengths in tokens")->capture_default_str();
  cmd->add_option("--samples", o->samples, "Samples per task and length")->capture_default_str();
  cmd->add_option("--haystack", o->haystack, "Filler text (file or folder); default RULER's noise sentences");
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens decoded per answer")->capture_default_str();
  o->add_output_to(*cmd, "Folder for tasks.{json,csv,md}, rewritten as each task finishes",
                   "Print one JSON object on stdout");
  on_run(cmd, o, action, run);
}

}  // namespace kvc::eval_app
