// kvc-eval sweep: methods × compression ratios × tasks, resumable, with tables and plots.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "eval/kl_divergence.h"
#include "eval_common.h"
#include "harness/result_store.h"
#include "harness/sweep_plan.h"
#include "harness/sweep_report.h"
#include "harness/sweep_shards.h"
#include "flag_vocabulary.h"
#include "harness_options.h"
#include "subcommands.h"
#include "task_command.h"
#include "tasks/haystack.h"
#include "tasks/synthetic.h"
#include "util/hash.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc::eval_app {
namespace {

// Retrieval cells are named "retrieval/SPEC" and have no ratio: what they read back is set by the spec.
const std::string kRetrievalPrefix = "retrieval/";

struct Options : TaskCommandOptions {
  std::vector<std::string> methods{"none"};
  std::vector<std::string> retrieval;
  std::string ratios = "0.25,0.5,0.75,0.9";
  std::string tasks = "kl,needle";
  std::string file;
  KlOptions kl;
  std::string haystack;
  std::string needle_lengths, needle_depths = "0,0.5,1";
  std::string templates = "secret";
  int samples = 3;
  std::string task_lengths;
  int64_t max_new_tokens = 32;
  int64_t max_cells = 0;
  std::string shard;
};

std::vector<std::string> known_tasks() {
  std::vector<std::string> t{"ppl", "kl", "needle"};
  for (const auto& n : synthetic_task_names()) t.push_back(n);
  return t;
}

// What one task needs, loaded once per sweep.
struct TaskInputs {
  std::vector<int> text_ids;  // ppl, kl
  std::vector<std::string> haystack_files;
  std::string haystack;
  NeedleGridOptions needle;
  std::vector<int64_t> task_lengths;
};

nlohmann::json evaluate_cell(const Options& o, const SweepCell& cell, const LlamaModel& model, const EvalContext& ctx,
                             const TaskInputs& in) {
  CompressionSpec spec;
  if (cell.method.rfind(kRetrievalPrefix, 0) == 0) {
    spec.retrieval = cell.method.substr(kRetrievalPrefix.size());
  } else {
    spec.press = cell.method;
    spec.ratio = cell.ratio;
  }
  const CacheSetup setup = build_cache_setup(spec, model);
  if (cell.task == "ppl" || cell.task == "kl") {
    const KlResult r = evaluate_kl(model, in.text_ids, o.kl, setup, false);
    const bool ppl = cell.task == "ppl";
    return {{"score", ppl ? r.ppl_compressed : r.mean_kl},
            {"metric", ppl ? "perplexity" : "kl_divergence"},
            {"higher_is_better", false},
            {"compression_ratio", r.compression_ratio()},
            {"kl", r.mean_kl},
            {"max_kl", r.max_kl},
            {"top1_agreement", r.top1_agreement},
            {"ppl_compressed", r.ppl_compressed},
            {"ppl_reference", r.ppl_reference},
            {"tokens_scored", r.tokens_scored},
            {"window", o.kl.plan.window},
            {"windows", r.windows}};
  }
  std::vector<SampleRecord> all;
  nlohmann::json detail = nlohmann::json::array();
  if (cell.task == "needle") {
    for (int64_t length : in.needle.lengths)
      for (double depth : in.needle.depths) {
        const NeedleCell c = run_needle_cell(ctx, setup, in.needle, length, depth);
        detail.push_back({{"length", length}, {"depth", depth}, {"accuracy", c.accuracy()}});
        all.insert(all.end(), c.samples.begin(), c.samples.end());
      }
  } else {
    for (int64_t length : in.task_lengths) {
      const auto recs = run_synthetic_cell(ctx, setup, cell.task, length, o.samples, o.harness.seed, in.haystack,
                                           DecodeOptions{o.max_new_tokens, true});
      detail.push_back({{"length", length}, {"score", mean_score(recs)}});
      all.insert(all.end(), recs.begin(), recs.end());
    }
  }
  double ratio = 0;
  for (const auto& r : all) ratio += r.compression_ratio;
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& r : all) samples.push_back(r.to_json());
  return {{"score", mean_score(all)},
          {"metric", cell.task == "needle" ? "accuracy" : "string_match"},
          {"higher_is_better", true},
          {"compression_ratio", all.empty() ? 0.0 : ratio / static_cast<double>(all.size())},
          {"cells", detail},
          {"samples", samples}};
}

int run(Options& o) {
  const std::vector<std::string> tasks = split_list(o.tasks);
  check_task_names(tasks, known_tasks());
  const std::vector<std::string> methods = resolve_methods(o.methods, press_names());
  std::vector<SweepCell> cells = plan_sweep(tasks, methods, parse_double_list(o.ratios, "--ratios"));
  for (const auto& task : tasks)
    for (const auto& spec : o.retrieval) cells.push_back(SweepCell{task, kRetrievalPrefix + spec, 0});
  KVC_CHECK(!o.out.empty(), "--out-dir is required (the folder for results.jsonl, tables and plots)");
  const auto uses = [&](auto pred) { return std::any_of(tasks.begin(), tasks.end(), pred); };
  const bool text_tasks = uses([](const std::string& t) { return t == "ppl" || t == "kl"; });
  const bool needle_task = uses([](const std::string& t) { return t == "needle"; });
  KVC_CHECK(!text_tasks || !o.file.empty(),
            "-f/--file is required for the ppl and kl tasks (e.g. -f data/text/wikitext2/wiki.test.raw)");
  KVC_CHECK(!needle_task || !o.haystack.empty(),
            "--haystack is required for the needle task (e.g. --haystack data/text/pg_essays)");
  const SweepShard shard = o.shard.empty() ? SweepShard{} : parse_sweep_shard(o.shard);
  ensure_out_dir(o.out);
  // A shard appends to a file of its own; the cells of results.jsonl (an earlier run or merge) count as done.
  ResultStore store(o.out + "/" + (shard.sharded() ? shard.results_name() : "results.jsonl"));
  const ResultStore earlier(o.out + "/results.jsonl");
  const auto done = [&](const SweepCell& c) { return store.has(c.key()) || earlier.has(c.key()); };

  const TaskRun loaded(o);  // its own setup is the uncompressed one; each cell builds its method's
  const LlamaModel& model = *loaded.model;
  TaskInputs in;
  if (text_tasks) in.text_ids = loaded.tokenize_file(o.file);
  if (needle_task) {
    in.haystack_files = haystack_files(o.haystack);
    in.haystack = load_haystack(in.haystack_files);
    in.needle.haystack = in.haystack;
    if (o.templates == "passkey") in.needle.spec = passkey_needle_spec();
    else KVC_CHECK(o.templates == "secret", "--templates: unknown set '{}' (use secret or passkey)", o.templates);
    const int64_t limit = model.config().max_position_embeddings;
    in.needle.lengths = o.needle_lengths.empty() ? std::vector<int64_t>{limit / 2} : parse_int_list(o.needle_lengths, "--needle-lengths");
    in.needle.depths = parse_double_list(o.needle_depths, "--needle-depths");
    in.needle.samples = o.samples;
    in.needle.seed = o.harness.seed;
  }
  const int64_t limit = model.config().max_position_embeddings;
  in.task_lengths = o.task_lengths.empty() ? std::vector<int64_t>{std::min<int64_t>(512, limit / 2)}
                                           : parse_int_list(o.task_lengths, "--task-lengths");

  // Cells are reused only under the settings they were made with; methods, ratios and tasks may grow.
  const std::string settings = hash_string(fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", model.config().config_hash, o.harness.query, o.harness.truncate,
      o.harness.seed, o.file, o.kl.plan.window, o.kl.plan.max_windows, o.haystack, o.needle_lengths, o.needle_depths,
      o.templates, o.samples, o.task_lengths, o.max_new_tokens));
  for (const ResultStore* s : std::initializer_list<const ResultStore*>{&store, &earlier}) {
    for (const auto& r : s->records()) {
      KVC_CHECK(r.value("settings", "") == settings,
                "--out-dir: {} holds cells made with other settings (model, --query, --seed, lengths, samples or "
                "data differ); use another --out-dir folder or delete the file",
                s->path());
    }
  }
  ShardStatus status{shard, settings, {}, 0, 0};
  for (size_t i = 0; i < cells.size(); ++i) {
    status.plan.push_back(cells[i].key());
    if (!shard.owns(i)) continue;
    ++status.owned;
    status.done += done(cells[i]);
  }
  const int64_t todo = status.owned - status.done;
  if (shard.sharded()) write_shard_status(o.out, status);
  if (!o.json) {
    const std::string part = shard.sharded() ? fmt::format("shard {} of {}: {} of ", shard.index, shard.count,
                                                            status.owned) : "";
    std::fprintf(stderr, "sweep: %s%zu cells (%lld done before, %lld to run) -> %s\n", part.c_str(), cells.size(),
                 static_cast<long long>(status.done), static_cast<long long>(todo), store.path().c_str());
  }
  Progress progress("sweep", todo, "cells", !o.json);
  int64_t ran = 0;
  bool stopped = false;
  for (size_t index = 0; index < cells.size(); ++index) {
    const SweepCell& cell = cells[index];
    if (!shard.owns(index) || done(cell)) continue;
    if (interrupted() || (o.max_cells > 0 && ran >= o.max_cells)) {
      stopped = true;
      break;
    }
    const auto cell_start = std::chrono::steady_clock::now();
    nlohmann::json result = evaluate_cell(o, cell, model, loaded.ctx, in);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - cell_start).count();
    const bool text_task = cell.task == "ppl" || cell.task == "kl";
    std::vector<std::string> data = text_task ? std::vector<std::string>{o.file} : in.haystack_files;
    nlohmann::json meta = harness_metadata(o.model, model, data, cell.method, o.harness, secs);
    meta["ratio"] = cell.ratio;
    store.append({{"cell", cell.key()},
                  {"settings", settings},
                  {"task", cell.task},
                  {"method", cell.method},
                  {"ratio", cell.ratio},
                  {"result", result},
                  {"metadata", meta}});
    ++ran;
    ++status.done;
    if (shard.sharded()) write_shard_status(o.out, status);
    progress.advance();
  }
  progress.finish();
  if (shard.sharded()) {
    nlohmann::json summary = {{"shard", shard.index},  {"shards", shard.count}, {"cells", cells.size()},
                              {"owned", status.owned}, {"ran", ran},            {"reused", status.done - ran},
                              {"complete", status.done == status.owned},        {"results", store.path()},
                              {"wall_seconds", loaded.seconds()}};
    if (o.json) std::printf("%s\n", summary.dump().c_str());
    else std::printf("sweep: shard %d of %d ran %lld cells, reused %lld, %s; wrote %s\nwhen every shard is done: "
                     "kvc-eval merge --out-dir %s\n", shard.index, shard.count, static_cast<long long>(ran),
                     static_cast<long long>(status.done - ran),
                     stopped ? "stopped early (re-run to resume)" : "complete", store.path().c_str(), o.out.c_str());
    return stopped && interrupted() ? 130 : 0;
  }
  const std::vector<std::string> pngs = write_sweep_report(o.out, store.records());
  nlohmann::json summary = {{"cells", cells.size()},
                            {"ran", ran},
                            {"reused", cells.size() - todo},
                            {"complete", status.done == status.owned},
                            {"results", store.path()},
                            {"plots", pngs},
                            {"wall_seconds", loaded.seconds()}};
  if (o.json) {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("%s", sweep_markdown(store.records()).c_str());
    std::printf("sweep: ran %lld cells, reused %lld, %s; wrote %s/results.{jsonl,csv,md} and %zu plots\n",
                static_cast<long long>(ran), static_cast<long long>(cells.size() - todo),
                stopped ? "stopped early (re-run to resume)" : "complete", o.out.c_str(), pngs.size());
  }
  return stopped && interrupted() ? 130 : 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("sweep", "Methods × compression ratios × tasks, resumable, with tables and plots");
  cmd->footer(fmt::format(
      "\nTasks: ppl, kl (on -f/--file), needle (grid of --needle-lengths × --needle-depths), and the synthetic tasks\n"
      "{}. Each task gets one uncompressed baseline cell (method none, ratio 0) and one cell per\n"
      "compressing method and ratio. Finished cells are appended to OUT/results.jsonl (one fsync'd line each);\n"
      "a re-run skips them, so Ctrl-C (which stops after the current cell) loses nothing. Writes\n"
      "OUT/results.csv, OUT/results.md and OUT/score_vs_ratio_<task>.png.\n\nExamples:\n"
      "  kvc-eval sweep -m data/models/stories260K --methods none,snapkv,h2o --ratios 0.5,0.9 --tasks kl "
      "-f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sweep\n"
      "  kvc-eval sweep -m data/models/kvc-micro-lm --methods none,snapkv --ratios 0.5 --tasks needle,niah_single "
      "--haystack data/text/pg_essays --needle-lengths 256 --needle-depths 0.5 --samples 1 --task-lengths 256 "
      "--out-dir out/sweep2\n"
      "  kvc-eval sweep -m data/models/stories260K --methods none,snapkv --ratios 0.5 --retrieval adaptive:budget=32 "
      "--tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sweep3\n"
      "\nShards: --shard I/N runs cells I, I+N, I+2N, ... of the plan; shards need no connection to each other (ranks of\n"
      "torchrun or Slurm and Slurm array tasks with --shard auto, a shell loop), only the same flags and --out-dir.\n"
      "Then kvc-eval merge --out-dir OUT writes the tables and plots of the whole sweep, as one process would:\n"
      "  scripts/ranks.sh 2 kvc-eval sweep -m data/models/stories260K --methods none,snapkv,h2o --ratios 0.5,0.9 "
      "--tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sharded --shard auto\n"
      "  kvc-eval merge --out-dir out/sharded\n",
      fmt::join(synthetic_task_names(), ", ")));
  o->add_common_to(*cmd, /*with_compression=*/false);
  cmd->add_option("--methods", o->methods, "Press specs NAME[:key=val,...], comma-separated, or all")
      ->delimiter('\0')
      ->capture_default_str();
  cmd->add_option("--retrieval", o->retrieval,
                  "Also evaluate the cache on storage: a retrieval spec per cell row, e.g. adaptive:budget=64 (repeatable)")
      ->delimiter('\0');
  cmd->add_option("--ratios", o->ratios, "Compression ratios (share of the cache removed)")->capture_default_str();
  cmd->add_option("--tasks", o->tasks, "Comma-separated tasks")->capture_default_str();
  cli::add_text_file(*cmd, o->file, "Text for ppl and kl (e.g. data/text/wikitext2/wiki.test.raw)");
  o->kl.plan.window = 256;
  o->kl.plan.max_windows = 4;
  cli::add_ctx_size(*cmd, o->kl.plan.window, "ppl/kl window in tokens")->capture_default_str();
  cmd->add_option("--max-windows", o->kl.plan.max_windows, "ppl/kl windows")->capture_default_str();
  cmd->add_option("--haystack", o->haystack, "Needle filler text, a file or folder (e.g. data/text/pg_essays)");
  cmd->add_option("--needle-lengths", o->needle_lengths, "Needle prompt lengths (default: half the model's context)");
  cmd->add_option("--needle-depths", o->needle_depths, "Needle depths")->capture_default_str();
  cmd->add_option("--templates", o->templates, "Needle templates: secret or passkey")->capture_default_str();
  cmd->add_option("--samples", o->samples, "Samples per needle cell / synthetic length")->capture_default_str();
  cmd->add_option("--task-lengths", o->task_lengths, "Synthetic task prompt lengths (default min(512, context/2))");
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens decoded per synthetic answer")->capture_default_str();
  cmd->add_option("--max-cells", o->max_cells, "Run at most N new cells, then stop (0 = all)")->capture_default_str();
  cmd->add_option("--shard", o->shard,
                  "Run only shard I of N of the cells (I/N, or auto: torchrun's RANK/WORLD_SIZE, Slurm's "
                  "SLURM_PROCID/SLURM_NTASKS or a Slurm array's task) into OUT/results.shard-I-of-N.jsonl; then "
                  "kvc-eval merge");
  cli::add_out_dir(*cmd, o->out, "Result folder")->required();
  cli::add_json_switch(*cmd, o->json, "Print a JSON summary on stdout");
  on_run(cmd, o, action, run);
}

}  // namespace kvc::eval_app
