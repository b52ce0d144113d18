// kvc-eval tasks: synthetic long-context tasks generated with a seed: RULER's 13 tasks as its recipe makes
// them (ruler_run.h) and kvc's seven RULER-style ones.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "flag_vocabulary.h"
#include "harness/sweep_plan.h"
#include "harness/tables.h"
#include "harness_options.h"
#include "metrics/ruler_metrics.h"
#include "ruler_run.h"
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
  std::string qa_dir;
  int samples = 5;
  int64_t max_new_tokens = 0;  // 0: 48 for kvc's tasks, RULER's tokens_to_generate for RULER's
};

constexpr int64_t kDefaultNewTokens = 48;

std::vector<std::string> known_task_names() {
  std::vector<std::string> names = synthetic_task_names();
  names.insert(names.end(), ruler_task_names().begin(), ruler_task_names().end());
  return names;
}

// RULER reports a task as evaluate.py does: the mean of its metric x 100, rounded to 2 decimals.
double ruler_report_score(const std::string& task, const std::vector<SampleRecord>& records) {
  std::vector<std::string> predictions;
  std::vector<std::vector<std::string>> references;
  for (const auto& r : records) {
    predictions.push_back(r.prediction);
    references.push_back(r.answers);
  }
  const bool qa = ruler_task_source(task) == RulerSource::kSquad || ruler_task_source(task) == RulerSource::kHotpotQa;
  return ruler_task_score(qa ? "string_match_part" : "string_match_all", predictions, references);
}

int run(Options& o) {
  if (o.tasks == "all") o.tasks = fmt::format("{}", fmt::join(synthetic_task_names(), ","));
  const std::vector<std::string> tasks = expand_ruler_group(split_list(o.tasks), o.qa_dir);
  check_task_names(tasks, known_task_names());  // before the model loads
  const std::vector<int64_t> lengths = parse_int_list(o.lengths, "--lengths");
  KVC_CHECK(o.samples >= 1, "--samples must be >= 1, got {}", o.samples);
  KVC_CHECK(o.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got {}", o.max_new_tokens);
  const RulerData ruler = load_ruler_data(tasks, o.haystack, o.qa_dir);
  const RulerInputs ruler_inputs = ruler.view();
  const TaskRun loaded(o);
  const CacheSetup& setup = loaded.setup;
  std::vector<std::string> files = o.haystack.empty() ? std::vector<std::string>{} : haystack_files(o.haystack);
  const std::string haystack = files.empty() ? "" : load_haystack(files);
  for (const auto& file : ruler.files) {
    if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
  }
  const DecodeOptions decode{o.max_new_tokens > 0 ? o.max_new_tokens : kDefaultNewTokens, true};

  Table table{{"task", "length", "samples", "score"}, {}};
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> failed;
  // Everything finished so far, written again after each task so a later failure or Ctrl-C keeps it.
  const auto report = [&] {
    nlohmann::json out = {
        {"method", setup.name},
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
          if (is_ruler_task(task)) {
            records.push_back(
                run_ruler_sample(loaded.ctx, setup, task, length, s, o.harness.seed, ruler_inputs, o.max_new_tokens));
          } else {
            auto one = run_synthetic_cell(loaded.ctx, setup, task, length, 1,
                                          sample_seed(o.harness.seed, std::to_string(s)), haystack, decode);
            one.front().id = fmt::format("{}-{}tok-{}", task, length, s);
            records.push_back(one.front());
          }
          progress.advance();
        }
        nlohmann::json samples = nlohmann::json::array();
        for (const auto& r : records) samples.push_back(r.to_json());
        results.push_back({{"task", task}, {"length", length}, {"score", mean_score(records)}, {"samples", samples}});
        if (is_ruler_task(task) && !records.empty()) results.back()["ruler_score"] = ruler_report_score(task, records);
        table.rows.push_back(
            {task, std::to_string(length), std::to_string(records.size()), format_number(mean_score(records), 4)});
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
  CLI::App* cmd = app.add_subcommand("tasks",
                                     "RULER's 13 tasks as its recipe generates them, and kvc's RULER-style "
                                     "synthetic tasks");
  cmd->footer(fmt::format(
      "\nRULER's tasks (`ruler` for all 13): {}.\n"
      "They follow RULER's scripts/synthetic.yaml (templates, needles, haystacks: noise, Paul Graham's essays from\n"
      "--haystack, default data/text/pg_essays, or other needles) and score with its string_match_all /\n"
      "string_match_part after its postprocessing; \"ruler_score\" in --json is the task score as RULER reports it\n"
      "(x100, 2 decimals). qa_1 and qa_2 read squad.json and hotpotqa.json (RULER's download_qa_dataset.sh)\n"
      "from --qa-dir (data/text/ruler_qa holds a tiny made-up pair); `ruler` skips them without it.\n"
      "Lengths count the prompt only (RULER's also count the tokens to generate).\nkvc's tasks (`all` for all seven): "
      "{}.\n"
      "Each sample is generated from --seed; a task's score is the mean over samples of its metric (share of\n"
      "required answers found). A task that fails (e.g. a length too short for it) is reported on stderr and\n"
      "the others go on; the exit status is then 1.\n\nExamples:\n"
      "  kvc-eval tasks -m data/models/kvc-micro-lm --tasks ruler --lengths 640 --samples 2\n"
      "  kvc-eval tasks -m data/models/kvc-micro-lm --tasks niah_single_1,vt,qa_1 --qa-dir data/text/ruler_qa "
      "--lengths 640\n"
      "  kvc-eval tasks -m data/models/stories260K --tasks niah_single,variable_tracking --lengths 448 --samples 2\n"
      "  kvc-eval tasks -m data/models/kvc-micro-lm --tasks all --lengths 512 --samples 1 --query agnostic --json\n",
      fmt::join(ruler_task_names(), ", "), fmt::join(synthetic_task_names(), ", ")));
  o->add_common_to(*cmd);
  cmd->add_option("--tasks", o->tasks,
                  "Comma-separated task names; ruler (RULER's 13) and all (kvc's 7) stand for groups")
      ->capture_default_str();
  cmd->add_option("--lengths", o->lengths,
                  "Prompt lengths in tokens (RULER's tasks: prompt + generated tokens, as RULER counts them)")
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "Samples per task and length")->capture_default_str();
  cmd->add_option("--haystack", o->haystack,
                  "Filler text (file or folder): kvc's tasks default to RULER's noise sentences, RULER's essay "
                  "tasks to data/text/pg_essays");
  cmd->add_option("--qa-dir", o->qa_dir, "Folder with RULER's squad.json and hotpotqa.json, for qa_1 and qa_2");
  cmd->add_option("--max-new-tokens", o->max_new_tokens,
                  "Tokens decoded per answer; 0: 48 for kvc's tasks, RULER's tokens_to_generate for RULER's "
                  "(niah 128, vt 30, cwe 120, fwe 50, qa 32)")
      ->capture_default_str();
  o->add_output_to(*cmd, "Folder for tasks.{json,csv,md}, rewritten as each task finishes",
                   "Print one JSON object on stdout");
  on_run(cmd, o, action, run);
}

}  // namespace kvc::eval_app
