#include "ruler_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "harness_options.h"
#include "metrics/metric_registry.h"
#include "tasks/haystack.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::eval_app {

namespace {

const char* const kDefaultEssays = "data/text/pg_essays";

bool needs(const std::vector<std::string>& tasks, RulerSource source) {
  return std::any_of(tasks.begin(), tasks.end(),
                     [&](const std::string& t) { return is_ruler_task(t) && ruler_task_source(t) == source; });
}

}  // namespace

std::vector<std::string> expand_ruler_group(const std::vector<std::string>& names, const std::string& qa_dir) {
  std::vector<std::string> out;
  for (const auto& name : names) {
    if (name != "ruler") {
      out.push_back(name);
      continue;
    }
    for (const auto& task : ruler_task_names()) {
      const bool qa =
          ruler_task_source(task) == RulerSource::kSquad || ruler_task_source(task) == RulerSource::kHotpotQa;
      if (!qa || !qa_dir.empty()) out.push_back(task);
    }
    if (qa_dir.empty()) {
      std::fprintf(stderr,
                   "kvc-eval: note: tasks: qa_1 and qa_2 skipped (they read RULER's squad.json and "
                   "hotpotqa.json from --qa-dir DIR)\n");
    }
  }
  return out;
}

RulerInputs RulerData::view() const {
  RulerInputs inputs;
  inputs.essay = essay;
  inputs.squad = squad ? &*squad : nullptr;
  inputs.hotpotqa = hotpotqa ? &*hotpotqa : nullptr;
  return inputs;
}

RulerData load_ruler_data(const std::vector<std::string>& tasks, const std::string& haystack_path,
                          const std::string& qa_dir) {
  RulerData data;
  if (needs(tasks, RulerSource::kEssay)) {
    KVC_CHECK(!haystack_path.empty() || is_directory(kDefaultEssays),
              "RULER's essay haystack: {} not found here; pass --haystack with Paul Graham's essays", kDefaultEssays);
    data.files = haystack_files(haystack_path.empty() ? kDefaultEssays : haystack_path);
    data.essay = load_haystack(data.files);
  }
  const bool squad = needs(tasks, RulerSource::kSquad), hotpotqa = needs(tasks, RulerSource::kHotpotQa);
  KVC_CHECK(!(squad || hotpotqa) || !qa_dir.empty(),
            "qa_1 and qa_2 need --qa-dir DIR with RULER's squad.json and hotpotqa.json "
            "(scripts/data/synthetic/json/download_qa_dataset.sh)");
  if (squad) {
    data.squad = load_ruler_qa(qa_dir, "qa_1");
    data.files.push_back(qa_dir + "/squad.json");
  }
  if (hotpotqa) {
    data.hotpotqa = load_ruler_qa(qa_dir, "qa_2");
    data.files.push_back(qa_dir + "/hotpotqa.json");
  }
  return data;
}

TaskItem ruler_item(const EvalContext& ctx, const std::string& task, int64_t length, int index, uint64_t run_seed,
                    const RulerInputs& inputs, int64_t max_new_tokens) {
  const DecodeOptions decode{max_new_tokens > 0 ? max_new_tokens : ruler_tokens_to_generate(task), false};
  const int64_t limit = ctx.model.config().max_position_embeddings;
  // RULER's max_seq_length counts the prompt and the tokens the task generates.
  KVC_CHECK(length <= limit, "--lengths: {} exceeds the model's context of {} ({})", length, limit, task);
  KVC_CHECK(length > decode.max_new_tokens + 8,
            "--lengths: {} leaves no room for a prompt besides the {} tokens {} generates (RULER's lengths count "
            "them)",
            length, decode.max_new_tokens, task);
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  const uint64_t seed = sample_seed(run_seed, fmt::format("ruler:{}:{}:{}", task, length, index));
  const TaskSample sample = fit_sample(ctx, length - decode.max_new_tokens, [&](size_t budget) {
    return make_ruler_sample(task, {budget, seed, static_cast<size_t>(index)}, count, inputs);
  });
  return TaskItem{fmt::format("{}-{}tok-{}", task, length, index),
                  sample.context,
                  sample.question + sample.answer_prefix,
                  sample.answers,
                  decode,
                  [metric = sample.metric, answers = sample.answers](const std::string& prediction) {
                    return score_with_metric(metric, prediction, answers);
                  },
                  {{"length", length}}};
}

SampleRecord run_ruler_sample(const EvalContext& ctx, const CacheSetup& setup, const std::string& task, int64_t length,
                              int index, uint64_t run_seed, const RulerInputs& inputs, int64_t max_new_tokens) {
  return evaluate_item(ctx, setup, ruler_item(ctx, task, length, index, run_seed, inputs, max_new_tokens));
}

}  // namespace kvc::eval_app
