// kvc-eval needle: needle-in-a-haystack accuracy over a grid of needle depth × prompt length.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "flag_vocabulary.h"
#include "harness/needle_report.h"
#include "harness/result_store.h"
#include "harness/tables.h"
#include "harness_options.h"
#include "subcommands.h"
#include "task_command.h"
#include "tasks/haystack.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/interrupt.h"
#include "util/output_lock.h"
#include "util/progress.h"

namespace kvc::eval_app {
namespace {

struct Options : TaskCommandOptions {
  std::string haystack;
  std::string lengths, depths = "0,0.25,0.5,0.75,1";
  std::string templates = "secret";
  std::string needle_template, question_template, entities;
  int samples = 3;
  int64_t max_new_tokens = 0;  // 0: 8, or 32 with --chat (an instruct model's reply restates the question first)
};

NeedleSpec needle_spec(const Options& o) {
  NeedleSpec spec = needle_spec_named(o.templates);
  if (!o.needle_template.empty()) spec.needle_template = o.needle_template;
  if (!o.question_template.empty()) spec.question_template = o.question_template;
  if (!o.entities.empty()) spec.entities = split_list(o.entities);
  KVC_CHECK(spec.needle_template.find("{number}") != std::string::npos,
            "--needle-template must contain {{number}}, got '{}'", spec.needle_template);
  return spec;
}

// Default lengths: quarters of the model's context, the last leaving room for the answer.
std::vector<int64_t> default_lengths(const LlamaModel& model, int64_t max_new_tokens) {
  const int64_t limit = model.config().max_position_embeddings;
  const int64_t top = limit - max_new_tokens - 16;
  return {limit / 4, limit / 2, 3 * limit / 4, top};
}

int run(Options& o) {
  KVC_CHECK(o.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got {}", o.max_new_tokens);
  if (o.max_new_tokens == 0) o.max_new_tokens = o.harness.chat ? 32 : 8;
  const TaskRun loaded(o);
  const LlamaModel& model = *loaded.model;
  const CacheSetup& setup = loaded.setup;
  const std::vector<std::string> files = haystack_files(o.haystack);

  NeedleGridOptions grid_options;
  grid_options.spec = needle_spec(o);
  grid_options.haystack = load_haystack(files);
  grid_options.lengths =
      o.lengths.empty() ? default_lengths(model, o.max_new_tokens) : parse_int_list(o.lengths, "--lengths");
  grid_options.depths = parse_double_list(o.depths, "--depths");
  for (double d : grid_options.depths) KVC_CHECK(d >= 0 && d <= 1, "--depths: {} is outside [0, 1]", d);
  KVC_CHECK(o.samples >= 1, "--samples must be >= 1, got {}", o.samples);
  grid_options.samples = o.samples;
  grid_options.seed = o.harness.seed;
  grid_options.max_new_tokens = o.max_new_tokens;

  // Cells of an earlier run with the same settings are reused from cells.jsonl in --out.
  const std::string run_key = hash_string(
      fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", model.config().config_hash, setup.name, o.harness.query,
                  o.harness.seed, o.samples, grid_options.spec.needle_template, grid_options.spec.question_template,
                  fmt::join(grid_options.spec.entities, ","), hash_files(files), o.max_new_tokens) +
      prompt_format_key(o.harness, o.model));
  std::unique_ptr<ResultStore> store;
  std::optional<OutputLock> lock;
  if (!o.out.empty()) {
    ensure_out_dir(o.out);
    lock.emplace(o.out, "cells.jsonl", "--out-dir");
    store = std::make_unique<ResultStore>(o.out + "/cells.jsonl");
  }

  NeedleGrid grid{grid_options.lengths, grid_options.depths, {}};
  const int64_t total = static_cast<int64_t>(grid.lengths.size() * grid.depths.size());
  Progress progress("needle", total, "cells", !o.json);
  bool stopped = false;
  for (int64_t length : grid.lengths) {
    for (double depth : grid.depths) {
      const std::string key = fmt::format("{}|{}|{}", run_key, length, format_number(depth, 4));
      if (store && store->has(key)) {
        for (const auto& r : store->records())
          if (r["cell"] == key) {
            NeedleCell cell{length, depth, {}};
            for (const auto& s : r["result"]["samples"]) cell.samples.push_back(SampleRecord::from_json(s));
            grid.cells.push_back(cell);
          }
        progress.advance();
        continue;
      }
      if (interrupted()) {
        stopped = true;
        break;
      }
      const auto cell_start = std::chrono::steady_clock::now();
      grid.cells.push_back(run_needle_cell(loaded.ctx, setup, grid_options, length, depth));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - cell_start).count();
      if (store) {
        store->append({{"cell", key},
                       {"result", grid.cells.back().to_json()},
                       {"metadata", harness_metadata(o.model, model, files, setup.name, o.harness, secs)}});
      }
      progress.advance();
    }
    if (stopped) break;
  }
  progress.finish();
  nlohmann::json metadata = harness_metadata(o.model, model, files, setup.name, o.harness, loaded.seconds());
  metadata["needle_template"] = grid_options.spec.needle_template;
  metadata["question_template"] = grid_options.spec.question_template;
  metadata["samples_per_cell"] = o.samples;
  metadata["max_new_tokens"] = o.max_new_tokens;
  metadata["complete"] = !stopped;
  std::string png;
  if (!o.out.empty()) {
    const std::string title =
        fmt::format("needle retrieval: {} ({}, query-{})", model.dir(), setup.name, o.harness.query);
    png = write_needle_report(o.out, title, grid, metadata);
  }
  if (o.json) {
    nlohmann::json j = needle_grid_json(grid, metadata);
    j["method"] = setup.name;
    j["heatmap"] = png;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("needle accuracy %.4f over %lld samples (%s, query-%s)%s\n", grid.overall_accuracy(),
                static_cast<long long>(grid.sample_count()), setup.name.c_str(), o.harness.query.c_str(),
                stopped ? " — interrupted, partial grid" : "");
    const auto acc = grid.accuracy();
    std::printf("%-8s", "depth");
    for (auto l : grid.lengths) std::printf(" %7lld", static_cast<long long>(l));
    std::printf("\n");
    for (size_t d = 0; d < grid.depths.size(); ++d) {
      std::printf("%-8s", format_number(grid.depths[d], 3).c_str());
      for (double v : acc[d]) std::printf(" %7s", std::isnan(v) ? "-" : format_number(v, 3).c_str());
      std::printf("\n");
    }
    if (!o.out.empty())
      std::printf("wrote %s/needle_grid.{json,csv,md}%s\n", o.out.c_str(),
                  png.empty() ? "" : " and needle_heatmap.png");
  }
  return task_exit_code();
}

}  // namespace

void add_needle_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("needle", "Needle in a haystack: accuracy grid of needle depth × prompt length");
  cmd->footer(
      "\nA fact (\"The secret number of the purple ship is 40721.\") is placed at each depth of filler text,\n"
      "asked at the end, and the greedy answer's first number must equal it. Lengths count the whole prompt\n"
      "(BOS or --chat's template turn + context + question). With --out-dir, cells are appended to cells.jsonl as they "
      "finish (a re-run\n"
      "resumes) and needle_grid.{json,csv,md} and needle_heatmap.png are written.\n\nExamples:\n"
      "  kvc-eval needle -m data/models/kvc-micro-lm --haystack data/text/pg_essays --lengths 256,512 --depths 0,1 "
      "--samples 2 --out-dir out/needle\n"
      "  kvc-eval needle -m data/models/stories260K --haystack data/text/tinystories/tinystories_excerpt_30k.txt "
      "--lengths 128,256 --depths 0,0.5,1 --templates passkey --json\n"
      "  kvc-eval needle -m data/models/kvc-micro-lm --haystack data/text/pg_essays --lengths 256 --depths 0.5 "
      "--samples 2 --press snapkv --ratio 0.5 --query agnostic --out-dir out/needle-snapkv50 "
      "--dump-kept out/needle-snapkv50/kept\n"
      "  kvc-eval needle -m data/models/kvc-micro-lm --haystack data/text/pg_essays --lengths 256 --depths 0.5 "
      "--samples 2 --retrieval adaptive:budget=64 --out-dir out/needle-retrieval\n"
      "  kvc-eval needle -m $(scripts/model_path.sh smollm2-135m) --chat --templates plain --haystack "
      "data/text/pg_essays "
      "--lengths 512 --depths 0.5 --samples 1 --json\n");
  o->add_common_to(*cmd);
  cmd->add_option("--haystack", o->haystack, "Filler text: a file or a folder of .txt (e.g. data/text/pg_essays)")
      ->required();
  cmd->add_option("--lengths", o->lengths, "Prompt lengths in tokens (default: quarters of the model's context)");
  cmd->add_option("--depths", o->depths, "Needle depths in [0, 1]")->capture_default_str();
  cmd->add_option("--samples", o->samples, "Needles per cell")->capture_default_str();
  cmd->add_option(
         "--templates", o->templates,
         "secret (the form kvc-micro-lm and kvc-tiny-lm were trained on), passkey, or plain (a question for an "
         "instruct model, with no answer begun: use with --chat)")
      ->capture_default_str();
  cmd->add_option("--needle-template", o->needle_template, "Needle sentence with {number} (and {entity})");
  cmd->add_option("--question-template", o->question_template, "Question (ending where the answer starts)");
  cmd->add_option("--entities", o->entities, "Comma-separated entities for {entity} (held-out variants)");
  cmd->add_option("--max-new-tokens", o->max_new_tokens,
                  "Tokens decoded for the answer (default 8; 32 with --chat, whose replies restate the question "
                  "before the number)");
  o->add_output_to(*cmd, "Folder for cells.jsonl, needle_grid.{json,csv,md}, needle_heatmap.png",
                   "Print the grid as one JSON object on stdout");
  on_run(cmd, o, action, run);
}

}  // namespace kvc::eval_app
