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
          {"seconds", seconds}};
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

SampleRecord evaluate_sample(const EvalContext& ctx, const CacheSetup& setup, const std::string& id,
                             const std::string& context_part, const std::string& question_part,
                             const std::vector<std::string>& answers, const DecodeOptions& decode,
                             const std::function<double(const std::string&)>& score) {
  const PromptTokens prompt = tokenize_prompt(ctx.tokenizer, ctx.model, context_part, question_part,
                                              decode.max_new_tokens, ctx.truncation, id, ctx.max_prompt_tokens);
  const SampleOutput out = run_sample(ctx.model, ctx.tokenizer, setup, prompt, ctx.mode, decode,
                                      kept_dump_path(ctx.dump_kept_dir, id), id);
  SampleRecord r;
  r.id = id;
  r.prediction = out.prediction;
  r.answers = answers;
  r.score = score(out.prediction);
  r.prompt_tokens = out.prompt_tokens;
  r.dropped_tokens = prompt.dropped;
  r.compression_ratio = out.compression_ratio();
  r.seconds = out.seconds;
  return r;
}

TaskSample fit_sample(const EvalContext& ctx, int64_t length, const std::function<TaskSample(size_t)>& make) {
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  auto overhead = [&](const TaskSample& s) {
    return static_cast<int64_t>(1 + count(s.question + s.answer_prefix));  // BOS + question part
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

NeedleCell run_needle_cell(const EvalContext& ctx, const CacheSetup& setup, const NeedleGridOptions& options,
                           int64_t length, double depth) {
  const int64_t limit = ctx.model.config().max_position_embeddings;
  KVC_CHECK(length + options.max_new_tokens <= limit,
            "--lengths: {} + {} new tokens exceeds the model's context of {}; use lengths up to {}", length,
            options.max_new_tokens, limit, limit - options.max_new_tokens);
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  NeedleCell cell;
  cell.length = length;
  cell.depth = depth;
  for (int s = 0; s < options.samples; ++s) {
    const uint64_t seed = sample_seed(options.seed, fmt::format("needle:{}:{:.4f}:{}", length, depth, s));
    const TaskSample sample = fit_sample(ctx, length, [&](size_t budget) -> TaskSample {
      return make_needle_sample(options.spec, options.haystack, budget, depth, seed, count);
    });
    const std::string number = sample.answers.front();
    const DecodeOptions decode{options.max_new_tokens, true};
    cell.samples.push_back(evaluate_sample(ctx, setup, sample.id, sample.context,
                                           sample.question + sample.answer_prefix, sample.answers, decode,
                                           [&](const std::string& p) { return needle_answer_correct(p, number) ? 1.0 : 0.0; }));
  }
  return cell;
}

std::vector<SampleRecord> run_synthetic_cell(const EvalContext& ctx, const CacheSetup& setup, const std::string& task,
                                             int64_t length, int samples, uint64_t seed, const std::string& haystack,
                                             const DecodeOptions& decode) {
  const auto count = [&](const std::string& text) { return ctx.tokenizer.encode(text).size(); };
  KVC_CHECK(length + decode.max_new_tokens <= ctx.model.config().max_position_embeddings,
            "--lengths: {} + {} new tokens exceeds the model's context of {}", length, decode.max_new_tokens,
            ctx.model.config().max_position_embeddings);
  std::vector<SampleRecord> out;
  for (int s = 0; s < samples; ++s) {
    const uint64_t sseed = sample_seed(seed, fmt::format("{}:{}:{}", task, length, s));
    const TaskSample sample = fit_sample(ctx, length, [&](size_t budget) {
      return make_synthetic_sample(task, budget, sseed, count, haystack);
    });
    const std::string metric = sample.metric.empty() ? "contains" : sample.metric;
    const std::string id = fmt::format("{}-{}tok-{}", task, length, s);
    out.push_back(evaluate_sample(ctx, setup, id, sample.context, sample.question + sample.answer_prefix,
                                  sample.answers, decode, [&](const std::string& p) {
                                    return score_with_metric(metric, p, sample.answers, sample.all_classes);
                                  }));
  }
  return out;
}

}  // namespace kvc
