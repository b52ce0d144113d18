// kvc-eval sweep: methods × compression ratios × tasks, resumable, with tables and plots.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "eval/kl_divergence.h"
#include "eval_common.h"
#include "harness/item_sweep.h"
#include "harness/result_store.h"
#include "harness/sweep_plan.h"
#include "harness/sweep_report.h"
#include "harness/sweep_shards.h"
#include "flag_vocabulary.h"
#include "harness_options.h"
#include "ruler_run.h"
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
  int64_t ruler_new_tokens = 0;  // 0: RULER's tokens_to_generate
  std::string qa_dir;
  std::string prefill = "shared";
  int64_t max_cells = 0;
  std::string shard;
};

std::vector<std::string> known_tasks() {
  std::vector<std::string> t{"ppl", "kl", "needle"};
  for (const auto& n : synthetic_task_names()) t.push_back(n);
  for (const auto& n : ruler_task_names()) t.push_back(n);
  return t;
}

bool is_text_task(const std::string& task) { return task == "ppl" || task == "kl"; }

// What one task needs, loaded once per sweep.
struct TaskInputs {
  std::vector<int> text_ids;  // ppl, kl
  std::vector<std::string> haystack_files;
  std::string haystack;
  NeedleGridOptions needle;
  std::vector<int64_t> task_lengths;
  RulerData ruler;
};

CacheSetup cell_setup(const SweepCell& cell, const LlamaModel& model) {
  CompressionSpec spec;
  if (cell.method.rfind(kRetrievalPrefix, 0) == 0) {
    spec.retrieval = cell.method.substr(kRetrievalPrefix.size());
  } else {
    spec.press = cell.method;
    spec.ratio = cell.ratio;
  }
  return build_cache_setup(spec, model);
}

// The samples of a sampled task, in the order its cells list them.
std::vector<TaskItem> task_items(const Options& o, const std::string& task, const EvalContext& ctx,
                                 const TaskInputs& in) {
  std::vector<TaskItem> items;
  const auto add = [&](std::vector<TaskItem> more) { items.insert(items.end(), more.begin(), more.end()); };
  if (task == "needle") {
    for (int64_t length : in.needle.lengths)
      for (double depth : in.needle.depths) add(needle_items(ctx, in.needle, length, depth));
  } else if (is_ruler_task(task)) {
    const RulerInputs inputs = in.ruler.view();
    for (int64_t length : in.task_lengths)
      for (int s = 0; s < o.samples; ++s)
        items.push_back(ruler_item(ctx, task, length, s, o.harness.seed, inputs, o.ruler_new_tokens));
  } else {
    for (int64_t length : in.task_lengths)
      add(synthetic_items(ctx, task, length, o.samples, o.harness.seed, in.haystack, DecodeOptions{o.max_new_tokens, true}));
  }
  return items;
}

nlohmann::json evaluate_text_cell(const Options& o, const SweepCell& cell, const LlamaModel& model,
                                  const TaskInputs& in) {
  const KlResult r = evaluate_kl(model, in.text_ids, o.kl, cell_setup(cell, model), false);
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

// Every task's cells: the press cells of plan_sweep, then its retrieval cells, task by task.
std::vector<SweepCell> plan_cells(const Options& o, const std::vector<std::string>& tasks) {
  const std::vector<std::string> methods = resolve_methods(o.methods, press_names());
  std::vector<SweepCell> cells;
  for (const auto& task : tasks) {
    for (const auto& c : plan_sweep({task}, methods, parse_double_list(o.ratios, "--ratios"))) cells.push_back(c);
    for (const auto& spec : o.retrieval) cells.push_back(SweepCell{task, kRetrievalPrefix + spec, 0});
  }
  return cells;
}

TaskInputs load_inputs(const Options& o, const std::vector<std::string>& tasks, const TaskRun& loaded) {
  const LlamaModel& model = *loaded.model;
  const auto uses = [&](auto pred) { return std::any_of(tasks.begin(), tasks.end(), pred); };
  TaskInputs in;
  if (uses(is_text_task)) {
    KVC_CHECK(!o.file.empty(), "-f/--file is required for the ppl and kl tasks (e.g. -f data/text/wikitext2/wiki.test.raw)");
    in.text_ids = loaded.tokenize_file(o.file);
  }
  if (uses([](const std::string& t) { return t == "needle"; })) {
    KVC_CHECK(!o.haystack.empty(), "--haystack is required for the needle task (e.g. --haystack data/text/pg_essays)");
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
  if (uses(is_ruler_task)) {
    in.ruler = load_ruler_data(tasks, o.haystack, o.qa_dir);
    if (in.haystack_files.empty()) in.haystack_files = in.ruler.files;
  }
  const int64_t limit = model.config().max_position_embeddings;
  in.task_lengths = o.task_lengths.empty() ? std::vector<int64_t>{std::min<int64_t>(512, limit / 2)}
                                           : parse_int_list(o.task_lengths, "--task-lengths");
  return in;
}

nlohmann::json cost_json(const SharedPrefillCost& c) {
  return {{"prefills", c.prefills},
          {"shared_outputs", c.shared_outputs},
          {"prefill_seconds", c.prefill_seconds},
          {"replay_seconds", c.replay_seconds},
          {"decode_seconds", c.decode_seconds},
          {"alone_seconds", c.alone_seconds}};
}

int run(Options& o) {
  const std::vector<std::string> tasks = expand_ruler_group(split_list(o.tasks), o.qa_dir);
  check_task_names(tasks, known_tasks());
  KVC_CHECK(o.prefill == "shared" || o.prefill == "per-cell", "--prefill: unknown mode '{}' (use shared or per-cell)",
            o.prefill);
  const std::vector<SweepCell> cells = plan_cells(o, tasks);
  KVC_CHECK(!o.out.empty(), "--out-dir is required (the folder for results.jsonl, tables and plots)");
  const SweepShard shard = o.shard.empty() ? SweepShard{} : parse_sweep_shard(o.shard);
  ensure_out_dir(o.out);
  // A shard appends to a file of its own; the cells of results.jsonl (an earlier run or merge) count as done.
  ResultStore store(o.out + "/" + (shard.sharded() ? shard.results_name() : "results.jsonl"));
  ResultStore checkpoint(o.out + "/" + (shard.sharded() ? "samples." + shard.results_name() : "samples.jsonl"), "sample");
  const ResultStore earlier(o.out + "/results.jsonl");
  const auto done = [&](const SweepCell& c) { return store.has(c.key()) || earlier.has(c.key()); };

  const TaskRun loaded(o);  // its own setup is the uncompressed one; each cell builds its method's
  const LlamaModel& model = *loaded.model;
  const TaskInputs in = load_inputs(o, tasks, loaded);

  // Cells are reused only under the settings they were made with; methods, ratios and tasks may grow.
  std::string settings_text = fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", model.config().config_hash, o.harness.query, o.harness.truncate,
      o.harness.seed, o.file, o.kl.plan.window, o.kl.plan.max_windows, o.haystack, o.needle_lengths, o.needle_depths,
      o.templates, o.samples, o.task_lengths, o.max_new_tokens);
  if (o.ruler_new_tokens > 0 || !o.qa_dir.empty()) settings_text += fmt::format("|{}|{}", o.ruler_new_tokens, o.qa_dir);
  const std::string settings = hash_string(settings_text);
  for (const ResultStore* s : std::initializer_list<const ResultStore*>{&store, &earlier, &checkpoint}) {
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
  SharedPrefillCost cost;
  const auto finish_cell = [&](const SweepCell& cell, const nlohmann::json& result, double secs) {
    std::vector<std::string> data = is_text_task(cell.task) ? std::vector<std::string>{o.file} : in.haystack_files;
    nlohmann::json meta = harness_metadata(o.model, model, data, cell.method, o.harness, secs);
    meta["ratio"] = cell.ratio;
    meta["prefill"] = is_text_task(cell.task) ? "per-cell" : o.prefill;
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
  };
  for (const auto& task : tasks) {
    // This task's cells still to run, in plan order, within --max-cells.
    std::vector<SweepCell> block;
    for (size_t index = 0; index < cells.size(); ++index) {
      if (cells[index].task != task || !shard.owns(index) || done(cells[index])) continue;
      if (o.max_cells > 0 && ran + static_cast<int64_t>(block.size()) >= o.max_cells) {
        stopped = true;
        break;
      }
      block.push_back(cells[index]);
    }
    if (block.empty()) continue;
    if (interrupted()) {
      stopped = true;
      break;
    }
    if (is_text_task(task)) {
      for (const SweepCell& cell : block) {
        if (interrupted()) break;
        const auto cell_start = std::chrono::steady_clock::now();
        const nlohmann::json result = evaluate_text_cell(o, cell, model, in);
        finish_cell(cell, result, std::chrono::duration<double>(std::chrono::steady_clock::now() - cell_start).count());
      }
      continue;
    }
    const std::vector<TaskItem> items = task_items(o, task, loaded.ctx, in);
    std::vector<CacheSetup> setups;
    for (const auto& cell : block) setups.push_back(cell_setup(cell, model));
    Progress samples(task, static_cast<int64_t>(items.size()), "samples", !o.json);
    const ItemSweepOutcome outcome = run_item_sweep(loaded.ctx, items, block, setups, checkpoint, settings,
                                                    o.prefill == "shared", [&] { samples.advance(); });
    samples.finish();
    cost += outcome.cost;
    if (!outcome.complete) break;
    for (size_t c = 0; c < block.size(); ++c) {
      double secs = 0;
      for (const auto& r : outcome.records[c]) secs += r.seconds;
      finish_cell(block[c], sampled_cell_result(task, items, outcome.records[c]), secs);
    }
  }
  stopped = stopped || interrupted();
  progress.finish();
  if (shard.sharded()) {
    nlohmann::json summary = {{"shard", shard.index},  {"shards", shard.count}, {"cells", cells.size()},
                              {"owned", status.owned}, {"ran", ran},            {"reused", status.done - ran},
                              {"complete", status.done == status.owned},        {"results", store.path()},
                              {"prefill", cost_json(cost)},                     {"wall_seconds", loaded.seconds()}};
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
                            {"prefill", cost_json(cost)},
                            {"wall_seconds", loaded.seconds()}};
  if (o.json) {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("%s", sweep_markdown(store.records()).c_str());
    if (cost.shared_outputs > 0) {
      std::printf("sweep: %lld prompts prefilled for %lld sample runs (%.1f s prefill, %.1f s replay, %.1f s decode)\n",
                  static_cast<long long>(cost.prefills), static_cast<long long>(cost.shared_outputs),
                  cost.prefill_seconds, cost.replay_seconds, cost.decode_seconds);
    }
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
      "\nTasks: ppl, kl (on -f/--file), needle (grid of --needle-lengths × --needle-depths), RULER's tasks at\n"
      "--task-lengths counting the generated tokens as RULER does (ruler names them all):\n  {}\nand kvc's synthetic tasks:\n  {}\n"
      "Each task gets one uncompressed baseline cell (method none, ratio 0) and one cell per\n"
      "compressing method and ratio. Finished cells are appended to OUT/results.jsonl (one fsync'd line each);\n"
      "a re-run skips them. Writes OUT/results.csv, OUT/results.md and OUT/score_vs_ratio_<task>.png.\n"
      "\nOne prefill, many methods (--prefill shared, the default): a sampled task runs sample by sample; each\n"
      "prompt is prefilled once with full attention, recording what every method's scoring asks for, and each\n"
      "press then compresses its own copy and decodes. Results equal --prefill per-cell runs exactly (a test\n"
      "checks it); retrieval cells and presses that score a repeated prompt (kvcompose:task=repeat) run\n"
      "alone. Each finished sample is checkpointed in OUT/samples.jsonl, so Ctrl-C loses at most the sample\n"
      "being run.\n\nExamples:\n"
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
      fmt::join(ruler_task_names(), ", "), fmt::join(synthetic_task_names(), ", ")));
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
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens decoded per answer of kvc's synthetic tasks")
      ->capture_default_str();
  cmd->add_option("--ruler-new-tokens", o->ruler_new_tokens,
                  "Tokens decoded per RULER answer (0: the task's own tokens_to_generate)")
      ->capture_default_str();
  cmd->add_option("--qa-dir", o->qa_dir, "Folder with RULER's squad.json and hotpotqa.json (qa_1, qa_2)");
  cmd->add_option("--prefill", o->prefill,
                  "shared: one prefill per sample serves every method; per-cell: each cell runs its samples alone")
      ->capture_default_str();
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
