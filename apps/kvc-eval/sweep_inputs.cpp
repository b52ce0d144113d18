#include "sweep_inputs.h"

#include <algorithm>
#include <map>

#include "cache/cache_types.h"
#include "harness/sweep_cell_spec.h"
#include "harness/sweep_plan.h"
#include "harness_options.h"
#include "press/press_registry.h"
#include "tasks/synthetic.h"

namespace kvc::eval_app {

std::vector<std::string> sweep_task_names() {
  std::vector<std::string> t{"ppl", "kl", "needle"};
  for (const auto& n : synthetic_task_names()) t.push_back(n);
  for (const auto& n : ruler_task_names()) t.push_back(n);
  return t;
}

bool is_text_task(const std::string& task) { return task == "ppl" || task == "kl"; }

// What --methods all runs: every method that a compression ratio sizes and that needs no file made for the
// model (lukv's curve=, named with it). The methods that size themselves
// (think, simlayerkv, duo_attention, dms: a share of channels, a threshold, a share of heads) take no
// --ratios: named with their own parameter, each is one cell at ratio 0. duo_attention named without its
// streaming= takes the ratios (as many streaming heads as remove each share of the cache).
namespace {
std::vector<std::string> ratio_methods() {
  std::vector<std::string> out;
  for (const auto& name : press_names())
    if (!press_sizes_itself(name) && !press_needs_file(name)) out.push_back(name);
  return out;
}
}  // namespace

std::vector<SweepCell> plan_cells(const SweepOptions& o, const std::vector<std::string>& tasks) {
  const std::vector<std::string> methods = resolve_methods(o.methods, press_names(), ratio_methods());
  const std::vector<std::string> lowrank_presses =
      o.lowrank_presses.empty() ? std::vector<std::string>{} : resolve_methods(o.lowrank_presses, press_names());
  KVC_CHECK(lowrank_presses.empty() || !o.lowrank.empty(),
            "--lowrank-press: give the low-rank caches to combine it with (--lowrank bases.safetensors:ranks=R)");
  const std::vector<std::string> typed_presses =
      o.typed_presses.empty() ? std::vector<std::string>{} : resolve_methods(o.typed_presses, press_names());
  KVC_CHECK(typed_presses.empty() || !o.typed.empty(),
            "--typed-cache-press: give the cache types to combine it with (--typed-cache q8_0)");
  for (const auto& type : o.typed) {
    KVC_CHECK(parse_cache_type(type, "--typed-cache") != at::ScalarType::Undefined,
              "--typed-cache auto is the model's own cache, the sweep's none row; name a type (f16, bf16, q8_0, q4_0)");
  }
  const ExtraRows rows{o.retrieval, o.lowrank, lowrank_presses, o.typed, typed_presses};
  const std::vector<double> ratios = parse_double_list(o.ratios, "--ratios");
  // A spec sizes itself as the cells will run it, after --method-spec (duo_attention pinned to streaming=).
  const std::map<std::string, std::string> pins = parse_method_specs(o.method_specs, press_names());
  const auto sizes_itself = [&](const std::string& spec) { return press_spec_sizes_itself(pinned_press(spec, pins)); };
  std::vector<SweepCell> cells;
  for (const auto& task : tasks) {
    for (const auto& c : plan_sweep({task}, methods, ratios, sizes_itself)) cells.push_back(c);
    for (const auto& c : extra_cells(task, rows, ratios)) cells.push_back(c);
  }
  return cells;
}

TaskInputs load_inputs(const SweepOptions& o, const std::vector<std::string>& tasks, const TaskRun& loaded) {
  const LlamaModel& model = *loaded.model;
  const auto uses = [&](auto pred) { return std::any_of(tasks.begin(), tasks.end(), pred); };
  TaskInputs in;
  if (uses(is_text_task)) {
    KVC_CHECK(!o.file.empty(),
              "-f/--file is required for the ppl and kl tasks (e.g. -f data/text/wikitext2/wiki.test.raw)");
    in.text_ids = loaded.tokenize_file(o.file);
  }
  if (uses([](const std::string& t) { return t == "needle"; })) {
    KVC_CHECK(!o.haystack.empty(), "--haystack is required for the needle task (e.g. --haystack data/text/pg_essays)");
    in.haystack_files = haystack_files(o.haystack);
    in.haystack = load_haystack(in.haystack_files);
    in.needle.haystack = in.haystack;
    in.needle.spec = needle_spec_named(o.templates);
    const int64_t limit = model.config().max_position_embeddings;
    in.needle.lengths = o.needle_lengths.empty() ? std::vector<int64_t>{limit / 2}
                                                 : parse_int_list(o.needle_lengths, "--needle-lengths");
    in.needle.depths = parse_double_list(o.needle_depths, "--needle-depths");
    in.needle.samples = o.samples;
    in.needle.seed = o.harness.seed;
    if (o.harness.chat) in.needle.max_new_tokens = 32;  // a chat reply restates the question before the number
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

std::vector<TaskItem> task_items(const SweepOptions& o, const std::string& task, const EvalContext& ctx,
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
      add(synthetic_items(ctx, task, length, o.samples, o.harness.seed, in.haystack,
                          DecodeOptions{o.max_new_tokens, true}));
  }
  return items;
}

nlohmann::json text_cell_result(const SweepOptions& o, const std::string& task, const KlResult& r) {
  const bool ppl = task == "ppl";
  return {{"score", ppl ? r.ppl_compressed : r.mean_kl},
          {"metric", ppl ? "perplexity" : "kl_divergence"},
          {"higher_is_better", false},
          {"compression_ratio", r.compression_ratio()},
          {"ram_ratio", r.ram_ratio()},
          {"kl", r.mean_kl},
          {"max_kl", r.max_kl},
          {"top1_agreement", r.top1_agreement},
          {"ppl_compressed", r.ppl_compressed},
          {"ppl_reference", r.ppl_reference},
          {"tokens_scored", r.tokens_scored},
          {"window", o.kl.plan.window},
          {"windows", r.windows},
          {"chunk", o.kl.chunk}};
}

}  // namespace kvc::eval_app
