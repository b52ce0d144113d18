#include "harness/task_eval.h"

#include <fmt/format.h>

#include <cctype>

#include "metrics/metric_registry.h"
#include "tasks/synthetic.h"
#include "util/error.h"
#include "util/hash.h"

namespace kvc {

nlohmann::json SampleRecord::to_json() const {
  return {{"id", id},
          {"prediction", prediction},
          {"answers", answers},
          {"score", score},
          {"prompt_tokens", prompt_tokens},
          {"dropped_tokens", dropped_tokens},
          {"compression_ratio", compression_ratio},
          {"ram_ratio", ram_ratio},
          {"seconds", seconds}};
}

SampleRecord SampleRecord::from_json(const nlohmann::json& j) {
  const auto field = [&](const char* name) -> const nlohmann::json& {
    KVC_CHECK(j.contains(name), "sample record without '{}': {}", name, j.dump());
    return j.at(name);
  };
  SampleRecord r;
  r.id = field("id").get<std::string>();
  r.prediction = field("prediction").get<std::string>();
  r.answers = field("answers").get<std::vector<std::string>>();
  r.score = field("score").get<double>();
  r.prompt_tokens = field("prompt_tokens").get<int64_t>();
  r.dropped_tokens = field("dropped_tokens").get<int64_t>();
  r.compression_ratio = field("compression_ratio").get<double>();
  // Records written before RAM was recorded come from caches held in RAM, whose RAM is their payload.
  r.ram_ratio = j.value("ram_ratio", r.compression_ratio);
  r.seconds = field("seconds").get<double>();
  return r;
}

bool needle_answer_correct(const std::string& prediction, const std::string& number) {
  size_t i = 0;
  while (i < prediction.size() && !std::isdigit(static_cast<unsigned char>(prediction[i]))) ++i;
  size_t j = i;
  while (j < prediction.size() && std::isdigit(static_cast<unsigned char>(prediction[j]))) ++j;
  return j > i && prediction.compare(i, j - i, number) == 0 && j - i == number.size();
}

uint64_t sample_seed(uint64_t run_seed, const std::string& coordinates) {
  const std::string key = fmt::format("{}|{}", run_seed, coordinates);
  return fnv1a64(key.data(), key.size());
}

std::string kept_dump_path(const std::string& dir, const std::string& sample_id) {
  if (dir.empty()) return {};
  std::string name = sample_id;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return dir + "/" + name + ".safetensors";
}

double mean_score(const std::vector<SampleRecord>& records) {
  if (records.empty()) return 0.0;
  double sum = 0;
  for (const auto& r : records) sum += r.score;
  return sum / static_cast<double>(records.size());
}

double NeedleCell::accuracy() const { return mean_score(samples); }

nlohmann::json NeedleCell::to_json() const {
  nlohmann::json s = nlohmann::json::array();
  for (const auto& r : samples) s.push_back(r.to_json());
  return {{"length", length}, {"depth", depth}, {"accuracy", accuracy()}, {"samples", s}};
}

namespace {

PromptTokens item_prompt(const EvalContext& ctx, const TaskItem& item) {
  return tokenize_prompt(ctx.tokenizer, ctx.model, item.context_part, item.question_part, item.decode.max_new_tokens,
                         ctx.truncation, item.id, ctx.max_prompt_tokens, ctx.bos, ctx.chat.get());
}

SampleRecord scored(const TaskItem& item, const PromptTokens& prompt, const SampleOutput& out) {
  SampleRecord r;
  r.id = item.id;
  r.prediction = out.prediction;
  r.answers = item.answers;
  r.score = item.score(out.prediction);
  r.prompt_tokens = out.prompt_tokens;
  r.dropped_tokens = prompt.dropped;
  r.compression_ratio = out.compression_ratio();
  r.ram_ratio = out.ram_ratio();
  r.seconds = out.seconds;
  return r;
}

}  // namespace

SampleRecord evaluate_item(const EvalContext& ctx, const CacheSetup& setup, const TaskItem& item) {
  const PromptTokens prompt = item_prompt(ctx, item);
  return scored(item, prompt,
                run_sample(ctx.model, ctx.tokenizer, setup, prompt, ctx.mode, item.decode,
                           kept_dump_path(ctx.dump_kept_dir, item.id), item.id));
}

std::vector<std::optional<SampleRecord>> evaluate_item_shared(const EvalContext& ctx,
                                                              const std::vector<const CacheSetup*>& setups,
                                                              const TaskItem& item, SharedPrefillCost* cost,
                                                              const std::function<bool()>& stop) {
  std::vector<std::optional<SampleRecord>> out(setups.size());
  if (!ctx.dump_kept_dir.empty()) {
    for (size_t i = 0; i < setups.size() && !(stop && stop()); ++i) out[i] = evaluate_item(ctx, *setups[i], item);
    return out;
  }
  const PromptTokens prompt = item_prompt(ctx, item);
  const std::vector<std::optional<SampleOutput>> outputs =
      run_sample_shared(ctx.model, ctx.tokenizer, setups, prompt, ctx.mode, item.decode, cost, stop, ctx.lockstep);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i]) out[i] = scored(item, prompt, *outputs[i]);
  return out;
}

SampleRecord evaluate_sample(const EvalContext& ctx, const CacheSetup& setup, const std::string& id,
                             const std::string& context_part, const std::string& question_part,
                             const std::vector<std::string>& answers, const DecodeOptions& decode,
                             const std::function<double(const std::string&)>& score) {
  return evaluate_item(ctx, setup, TaskItem{id, context_part, question_part, answers, decode, score, {}});
}

TaskSample fit_sample(const EvalContext& ctx, int64_t length, const std::function<TaskSample(size_t)>& make) {
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  // What frames the texts: BOS, if any, or the chat template's turn around them.
  const auto framing = static_cast<int64_t>(
      ctx.chat ? [&] {
        const ChatTaskPrompt empty = render_task_prompt(*ctx.chat, ctx.tokenizer, "", "");
        return encode_rendered_chat(ctx.tokenizer, empty.before_question, ctx.bos).size() +
               ctx.tokenizer.encode_with_specials(empty.from_question).size();
      }()
               : ctx.tokenizer.prompt_prefix(ctx.bos).size());
  auto overhead = [&](const TaskSample& s) {
    return framing + static_cast<int64_t>(count(s.question + s.answer_prefix));  // + the question part
  };
  KVC_CHECK(length > 8, "--lengths: {} tokens is too short for a task prompt", length);
  TaskSample sample = make(static_cast<size_t>(length - 8));
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int64_t budget = length - overhead(sample);
    KVC_CHECK(budget > 0, "--lengths: {} tokens leave no room for the context after the question", length);
    sample = make(static_cast<size_t>(budget));
    if (static_cast<int64_t>(count(sample.context)) + overhead(sample) <= length) return sample;
  }
  return sample;  // a few tokens over is harmless: the model's limit is checked when the prompt is run
}

std::vector<TaskItem> needle_items(const EvalContext& ctx, const NeedleGridOptions& options, int64_t length,
                                   double depth) {
  const int64_t limit = ctx.model.config().max_position_embeddings;
  KVC_CHECK(length + options.max_new_tokens <= limit,
            "--lengths: {} + {} new tokens exceeds the model's context of {}; use lengths up to {}", length,
            options.max_new_tokens, limit, limit - options.max_new_tokens);
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  std::vector<TaskItem> items;
  for (int s = 0; s < options.samples; ++s) {
    const uint64_t seed = sample_seed(options.seed, fmt::format("needle:{}:{:.4f}:{}", length, depth, s));
    const TaskSample sample = fit_sample(ctx, length, [&](size_t budget) -> TaskSample {
      return make_needle_sample(options.spec, options.haystack, budget, depth, seed, count);
    });
    const std::string number = sample.answers.front();
    items.push_back(TaskItem{sample.id,
                             sample.context,
                             sample.question + sample.answer_prefix,
                             sample.answers,
                             DecodeOptions{options.max_new_tokens, true},
                             [number](const std::string& p) { return needle_answer_correct(p, number) ? 1.0 : 0.0; },
                             {{"length", length}, {"depth", depth}}});
  }
  return items;
}

NeedleCell run_needle_cell(const EvalContext& ctx, const CacheSetup& setup, const NeedleGridOptions& options,
                           int64_t length, double depth) {
  NeedleCell cell;
  cell.length = length;
  cell.depth = depth;
  for (const TaskItem& item : needle_items(ctx, options, length, depth))
    cell.samples.push_back(evaluate_item(ctx, setup, item));
  return cell;
}

std::vector<TaskItem> synthetic_items(const EvalContext& ctx, const std::string& task, int64_t length, int samples,
                                      uint64_t seed, const std::string& haystack, const DecodeOptions& decode) {
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  KVC_CHECK(length + decode.max_new_tokens <= ctx.model.config().max_position_embeddings,
            "--lengths: {} + {} new tokens exceeds the model's context of {}", length, decode.max_new_tokens,
            ctx.model.config().max_position_embeddings);
  std::vector<TaskItem> items;
  for (int s = 0; s < samples; ++s) {
    const uint64_t sseed = sample_seed(seed, fmt::format("{}:{}:{}", task, length, s));
    const TaskSample sample = fit_sample(
        ctx, length, [&](size_t budget) { return make_synthetic_sample(task, budget, sseed, count, haystack); });
    const std::string metric = sample.metric.empty() ? "contains" : sample.metric;
    items.push_back(TaskItem{fmt::format("{}-{}tok-{}", task, length, s),
                             sample.context,
                             sample.question + sample.answer_prefix,
                             sample.answers,
                             decode,
                             [metric, answers = sample.answers, classes = sample.all_classes](const std::string& p) {
                               return score_with_metric(metric, p, answers, classes);
                             },
                             {{"length", length}}});
  }
  return items;
}

std::vector<SampleRecord> run_synthetic_cell(const EvalContext& ctx, const CacheSetup& setup, const std::string& task,
                                             int64_t length, int samples, uint64_t seed, const std::string& haystack,
                                             const DecodeOptions& decode) {
  std::vector<SampleRecord> out;
  for (const TaskItem& item : synthetic_items(ctx, task, length, samples, seed, haystack, decode))
    out.push_back(evaluate_item(ctx, setup, item));
  return out;
}

}  // namespace kvc
