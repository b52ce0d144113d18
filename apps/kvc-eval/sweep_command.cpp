// kvc-eval sweep: methods × compression ratios × tasks, resumable, with tables and plots.
#include <fmt/format.h>

#include <cstdio>
#include <map>

#include "eval_common.h"
#include "flag_vocabulary.h"
#include "harness/item_sweep.h"
#include "harness/kl_sweep.h"
#include "harness/result_store.h"
#include "harness/sweep_cell_spec.h"
#include "harness/sweep_report.h"
#include "harness/sweep_shards.h"
#include "harness_options.h"
#include "press/press_registry.h"
#include "subcommands.h"
#include "sweep_inputs.h"
#include "tasks/synthetic.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/interrupt.h"
#include "util/named_settings.h"
#include "util/output_lock.h"
#include "util/progress.h"

namespace kvc::eval_app {
namespace {

nlohmann::json cost_json(const SharedPrefillCost& c) {
  return {{"prefills", c.prefills},
          {"shared_outputs", c.shared_outputs},
          {"prefill_seconds", c.prefill_seconds},
          {"replay_seconds", c.replay_seconds},
          {"decode_seconds", c.decode_seconds},
          {"alone_seconds", c.alone_seconds}};
}

int run(SweepOptions& o) {
  const std::vector<std::string> tasks = expand_ruler_group(split_list(o.tasks), o.qa_dir);
  check_task_names(tasks, sweep_task_names());
  KVC_CHECK(o.prefill == "shared" || o.prefill == "per-cell", "--prefill: unknown mode '{}' (use shared or per-cell)",
            o.prefill);
  // Checked whatever the tasks: a bad value must not pass silently because no ppl/kl cell ran this time.
  KVC_CHECK(o.lockstep >= 1, "--lockstep must be >= 1, got {}", o.lockstep);
  KVC_CHECK(o.kl.chunk >= 1, "--chunk must be >= 1, got {}", o.kl.chunk);
  const std::vector<SweepCell> cells = plan_cells(o, tasks);
  // Not part of the settings: a recipe pins what its committed cells were made with.
  const std::map<std::string, std::string> pins = parse_method_specs(o.method_specs, press_names());
  KVC_CHECK(!o.out.empty(), "--out-dir is required (the folder for results.jsonl, tables and plots)");
  const SweepShard shard = o.shard.empty() ? SweepShard{} : parse_sweep_shard(o.shard);
  ensure_out_dir(o.out);
  // Shards of one sweep share the folder, each appending to its own file; two runs of the same one may not.
  const OutputLock lock(o.out, shard.sharded() ? shard.results_name() : "results.jsonl", "--out-dir");
  // A shard appends to a file of its own; the cells of results.jsonl (an earlier run or merge) count as done.
  ResultStore store(o.out + "/" + (shard.sharded() ? shard.results_name() : "results.jsonl"));
  ResultStore checkpoint(o.out + "/" + (shard.sharded() ? "samples." + shard.results_name() : "samples.jsonl"),
                         "sample");
  const ResultStore earlier(o.out + "/results.jsonl");
  const auto done = [&](const SweepCell& c) { return store.has(c.key()) || earlier.has(c.key()); };

  const TaskRun loaded(o);  // its own setup is the uncompressed one; each cell builds its method's
  const LlamaModel& model = *loaded.model;
  const TaskInputs in = load_inputs(o, tasks, loaded);

  // Cells are reused only under the settings they were made with; methods, ratios and tasks may grow.
  std::string settings_text =
      fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", model.config().config_hash, o.harness.query,
                  o.harness.truncate, o.harness.seed, o.file, o.kl.plan.window, o.kl.plan.max_windows, o.haystack,
                  o.needle_lengths, o.needle_depths, o.templates, o.samples, o.task_lengths, o.max_new_tokens);
  if (o.ruler_new_tokens > 0 || !o.qa_dir.empty()) settings_text += fmt::format("|{}|{}", o.ruler_new_tokens, o.qa_dir);
  if (o.kl.chunk != 1) settings_text += fmt::format("|chunk {}", o.kl.chunk);
  settings_text += prompt_format_key(o.harness, o.model);
  const std::string settings = hash_string(settings_text);
  // The same settings by flag, kept in the folder so that a mismatch can name what differs.
  const NamedSettings named = {
      {"the model's config hash", model.config().config_hash},
      {"--query", o.harness.query},
      {"--truncate", o.harness.truncate},
      {"--seed", fmt::format("{}", o.harness.seed)},
      {"-f/--file", o.file},
      {"-c/--ctx-size", fmt::format("{}", o.kl.plan.window)},
      {"--max-windows", fmt::format("{}", o.kl.plan.max_windows)},
      {"--haystack", o.haystack},
      {"--needle-lengths", o.needle_lengths},
      {"--needle-depths", o.needle_depths},
      {"--templates", o.templates},
      {"--samples", fmt::format("{}", o.samples)},
      {"--task-lengths", o.task_lengths},
      {"--max-new-tokens", fmt::format("{}", o.max_new_tokens)},
      {"--ruler-new-tokens", fmt::format("{}", o.ruler_new_tokens)},
      {"--qa-dir", o.qa_dir},
      {"--chunk", fmt::format("{}", o.kl.chunk)},
      {"--chat, --chat-template, --system, --bos/--no-bos", prompt_format_key(o.harness, o.model)}};
  const std::string settings_file = o.out + "/sweep_settings.json";
  for (const ResultStore* s : std::initializer_list<const ResultStore*>{&store, &earlier, &checkpoint}) {
    for (const auto& r : s->records()) {
      if (r.value("settings", "") == settings) continue;
      const std::string differences =
          file_exists(settings_file) ? settings_differences(parse_named_settings(read_text_file(settings_file)), named)
                                     : "";
      KVC_CHECK(differences.empty(),
                "--out-dir: {} holds cells made with {}; run with those flags, or use another "
                "--out-dir folder",
                s->path(), differences);
      fail(
          "--out-dir: {} holds cells made with other settings (model, --query, --seed, lengths, samples or data "
          "differ); use another --out-dir folder or delete the file",
          s->path());
    }
  }
  write_file_atomic(settings_file, named_settings_text(named) + "\n");
  ShardStatus status{shard, settings, {}, 0, 0};
  for (size_t i = 0; i < cells.size(); ++i) {
    status.plan.push_back(cells[i].key());
    if (!shard.owns(i)) continue;
    ++status.owned;
    status.done += done(cells[i]);
  }
  const int64_t todo = status.owned - status.done;
  // Every cell to run builds its compression first: a spec the model cannot serve stops the sweep before any runs.
  std::map<std::string, CacheSetup> setups_by_cell;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!shard.owns(i) || done(cells[i])) continue;
    CompressionSpec compression = cell_compression(cells[i]);
    compression.press = pinned_press(compression.press, pins);
    setups_by_cell.emplace(cells[i].key(), build_cache_setup(compression, model));
  }
  if (shard.sharded()) write_shard_status(o.out, status);
  if (!o.json) {
    const std::string part =
        shard.sharded() ? fmt::format("shard {} of {}: {} of ", shard.index, shard.count, status.owned) : "";
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
    meta["prefill"] = o.prefill;
    if (const std::string press = cell_compression(cell).press; pinned_press(press, pins) != press)
      meta["press_spec"] = pinned_press(press, pins);
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
    std::vector<CacheSetup> setups;
    for (const auto& cell : block) setups.push_back(setups_by_cell.at(cell.key()));
    if (is_text_task(task) && o.prefill == "per-cell") {
      for (size_t c = 0; c < block.size() && !interrupted(); ++c) {
        const KlResult r = evaluate_kl(model, in.text_ids, o.kl, setups[c], false);
        finish_cell(block[c], text_cell_result(o, task, r), r.seconds);
      }
      continue;
    }
    if (is_text_task(task)) {
      Progress windows(task,
                       static_cast<int64_t>(plan_windows(static_cast<int64_t>(in.text_ids.size()), o.kl.plan).size()),
                       "windows", !o.json);
      const KlSweepOutcome outcome =
          run_kl_sweep(model, in.text_ids, o.kl, block, setups, checkpoint, settings, true, [&] { windows.advance(); });
      windows.finish();
      cost += outcome.cost;
      if (!outcome.complete) break;
      for (size_t c = 0; c < block.size(); ++c)
        finish_cell(block[c], text_cell_result(o, task, outcome.results[c]), outcome.results[c].seconds);
      continue;
    }
    const std::vector<TaskItem> items = task_items(o, task, loaded.ctx, in);
    Progress samples(task, static_cast<int64_t>(items.size()), "samples", !o.json);
    EvalContext ctx = loaded.ctx;
    ctx.lockstep = o.lockstep;
    const ItemSweepOutcome outcome = run_item_sweep(ctx, items, block, setups, checkpoint, settings,
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
    nlohmann::json summary = {{"shard", shard.index},
                              {"shards", shard.count},
                              {"cells", cells.size()},
                              {"owned", status.owned},
                              {"ran", ran},
                              {"reused", status.done - ran},
                              {"complete", status.done == status.owned},
                              {"results", store.path()},
                              {"prefill", cost_json(cost)},
                              {"wall_seconds", loaded.seconds()}};
    if (o.json) std::printf("%s\n", summary.dump().c_str());
    else
      std::printf(
          "sweep: shard %d of %d ran %lld cells, reused %lld, %s; wrote %s\nwhen every shard is done: "
          "kvc-eval merge --out-dir %s\n",
          shard.index, shard.count, static_cast<long long>(ran), static_cast<long long>(status.done - ran),
          stopped ? "stopped early (re-run to resume)" : "complete", store.path().c_str(), o.out.c_str());
    return stopped && interrupted() ? 130 : 0;
  }
  const std::vector<std::string> pngs = write_sweep_report(o.out, store.records());
  nlohmann::json summary = {{"cells", cells.size()},         {"ran", ran},
                            {"reused", cells.size() - todo}, {"complete", status.done == status.owned},
                            {"results", store.path()},       {"plots", pngs},
                            {"prefill", cost_json(cost)},    {"wall_seconds", loaded.seconds()}};
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
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand("sweep", "Methods × compression ratios × tasks, resumable, with tables and plots");
  cmd->footer(fmt::format(
      "\nTasks: ppl, kl (on -f/--file), needle (grid of --needle-lengths × --needle-depths), RULER's tasks at\n"
      "--task-lengths counting the generated tokens as RULER does (ruler names them all):\n  {}\nand kvc's synthetic "
      "tasks:\n  {}\n"
      "Each task gets one uncompressed baseline cell (method none, ratio 0) and one cell per\n"
      "compressing method and ratio. Finished cells are appended to OUT/results.jsonl (one fsync'd line each);\n"
      "a re-run skips them. Writes OUT/results.csv, OUT/results.md and OUT/score_vs_ratio_<task>.png.\n"
      "\nOne prefill, many methods (--prefill shared, the default): a sampled task runs sample by sample; each\n"
      "prompt is prefilled once with full attention, recording what every method's scoring asks for, and each\n"
      "press then compresses its own copy; the cells of one prefill decode in lockstep, --lockstep at a time (each\n"
      "decode step reads the model's weights once for all of them). Results equal --prefill per-cell runs exactly (a "
      "test\n"
      "checks it); retrieval cells run alone, and presses that score the prompt with tokens fed after it (kvzip,\n"
      "kvcompose:task=repeat) share one prefill with those tokens per sample;\n"
      "a low-rank cache gets a prefill of its own per sample, shared by the presses storing their entries in it.\n"
      "ppl and kl run window by window: the exact model's run of a window serves every cell, and the presses\n"
      "take the window's compressed first half from one prefill. Each cell's finished sample or window is\n"
      "checkpointed in OUT/samples.jsonl, and Ctrl-C stops between cells (or between a shared prefill's layers): it\n"
      "loses at most the cells being run (those decoding in lockstep).\n"
      "\nLow-rank rows: --lowrank SPEC adds a row for that cache alone (its memory is set by the spec, so it has\n"
      "no ratio); --lowrank-press PRESS adds PRESS at every ratio with each --lowrank cache storing what it keeps.\n"
      "Typed rows: --typed-cache TYPE adds the dense cache with its keys and values stored in TYPE (f16, bf16,\n"
      "q8_0, q4_0, as -ctk/-ctv store them); --typed-cache-press PRESS adds PRESS at every ratio over each typed\n"
      "cache. A typed cache's prefill attends over its rounded entries, so each type gets one prefill of its own,\n"
      "shared by its presses.\n"
      "\nExamples:\n"
      "  kvc-eval sweep -m data/models/stories260K --methods none,snapkv,h2o --ratios 0.5,0.9 --tasks kl "
      "-f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sweep\n"
      "  kvc-eval sweep -m data/models/kvc-micro-lm --methods none,snapkv --ratios 0.5 --tasks needle,niah_single "
      "--haystack data/text/pg_essays --needle-lengths 256 --needle-depths 0.5 --samples 1 --task-lengths 256 "
      "--out-dir out/sweep2\n"
      "  kvc-eval sweep -m data/models/stories260K --methods none,snapkv --ratios 0.5 --retrieval adaptive:budget=32 "
      "--tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sweep3\n"
      "  kvc-calibrate -m data/models/stories260K -f data/text/tinystories/tinystories_excerpt_30k.txt --tokens 4000 "
      "-o bases.safetensors\n"
      "  kvc-eval sweep -m data/models/stories260K --methods none --ratios 0.5 --lowrank bases.safetensors:ranks=16 "
      "--lowrank-press snapkv --tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir "
      "out/sweep4\n"
      "  kvc-eval sweep -m data/models/kvc-micro-lm --methods none --ratios 0.5 --typed-cache q8_0,q4_0 "
      "--typed-cache-press snapkv --tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 "
      "--out-dir out/sweep5\n"
      "\nShards: --shard I/N runs cells I, I+N, I+2N, ... of the plan; shards need no connection to each other (ranks "
      "of\n"
      "torchrun or Slurm and Slurm array tasks with --shard auto, a shell loop), only the same flags and --out-dir.\n"
      "Then kvc-eval merge --out-dir OUT writes the tables and plots of the whole sweep, as one process would:\n"
      "  scripts/ranks.sh 2 kvc-eval sweep -m data/models/stories260K --methods none,snapkv,h2o --ratios 0.5,0.9 "
      "--tasks kl -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 2 --out-dir out/sharded --shard auto\n"
      "  kvc-eval merge --out-dir out/sharded\n",
      fmt::join(ruler_task_names(), ", "), fmt::join(synthetic_task_names(), ", ")));
  o->add_common_to(*cmd, /*with_compression=*/false);
  cmd->add_option("--methods", o->methods,
                  "Press specs NAME[:key=val,...], comma-separated, or all (every method that --ratios sizes)")
      ->delimiter('\0')
      ->capture_default_str();
  cmd->add_option("--method-spec", o->method_specs,
                  "NAME=SPEC: the cells of method NAME (bare in --methods, or from all) run SPEC, a spec of NAME, "
                  "and keep the name NAME, e.g. dynamickv=dynamickv:window=32,rmax=2 (repeatable)")
      ->delimiter('\0');
  cmd->add_option(
         "--retrieval", o->retrieval,
         "Also evaluate the cache on storage: a retrieval spec per cell row, e.g. adaptive:budget=64 (repeatable)")
      ->delimiter('\0');
  cmd->add_option("--lowrank", o->lowrank,
                  "Also evaluate a low-rank cache: a --lowrank spec per row, e.g. bases.safetensors:ranks=64 or "
                  "gates.safetensors:tau=0.3 (repeatable)")
      ->delimiter('\0');
  cmd->add_option("--lowrank-press", o->lowrank_presses,
                  "Also evaluate these presses at every ratio with each --lowrank cache storing what they keep")
      ->delimiter('\0');
  cmd->add_option(
         "--typed-cache", o->typed,
         "Also evaluate the dense cache with keys and values stored in this type: f32, f16, bf16, q8_0 or q4_0 "
         "(a row each; repeatable or comma-separated)")
      ->delimiter(',');
  cmd->add_option("--typed-cache-press", o->typed_presses,
                  "Also evaluate these presses at every ratio over each --typed-cache cache (repeatable)")
      ->delimiter('\0');
  cmd->add_option("--ratios", o->ratios, "Compression ratios (share of the cache removed)")->capture_default_str();
  cmd->add_option("--tasks", o->tasks, "Comma-separated tasks")->capture_default_str();
  cli::add_text_file(*cmd, o->file, "Text for ppl and kl (e.g. data/text/wikitext2/wiki.test.raw)");
  o->kl.plan.window = 256;
  o->kl.plan.max_windows = 4;
  cli::add_ctx_size(*cmd, o->kl.plan.window, "ppl/kl window in tokens")->capture_default_str();
  cmd->add_option("--max-windows", o->kl.plan.max_windows, "ppl/kl windows")->capture_default_str();
  cmd->add_option("--chunk", o->kl.chunk,
                  "ppl/kl: tokens fed per step after each window's compressed first half (1 with --retrieval, "
                  "which picks entries per token)")
      ->capture_default_str();
  cmd->add_option("--haystack", o->haystack, "Needle filler text, a file or folder (e.g. data/text/pg_essays)");
  cmd->add_option("--needle-lengths", o->needle_lengths, "Needle prompt lengths (default: half the model's context)");
  cmd->add_option("--needle-depths", o->needle_depths, "Needle depths")->capture_default_str();
  cmd->add_option("--templates", o->templates,
                  "Needle templates: secret, passkey or plain (see kvc-eval needle --help)")
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "Samples per needle cell / synthetic length")->capture_default_str();
  cmd->add_option("--task-lengths", o->task_lengths, "Synthetic task prompt lengths (default min(512, context/2))");
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens decoded per answer of kvc's synthetic tasks")
      ->capture_default_str();
  cmd->add_option("--ruler-new-tokens", o->ruler_new_tokens,
                  "Tokens decoded per RULER answer (0: the task's own tokens_to_generate)")
      ->capture_default_str();
  cmd->add_option("--qa-dir", o->qa_dir, "Folder with RULER's squad.json and hotpotqa.json (qa_1, qa_2)");
  cmd->add_option(
         "--prefill", o->prefill,
         "shared: one prefill per sample (or ppl/kl window) serves every method; per-cell: each cell runs alone")
      ->capture_default_str();
  cmd->add_option("--lockstep", o->lockstep,
                  "Cells of one shared prefill decoded together: each decode step reads the weights once for all of "
                  "them (the same results; each holds its compressed cache meanwhile). 1: one cell at a time")
      ->check(CLI::Range(int64_t{1}, int64_t{256}))
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
