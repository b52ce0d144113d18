#pragma once
// Scoring samples with a CacheSetup: needle cells (exact match of the number) and generated/loaded task
// samples (their metric). Lengths given to the generators are *prompt* lengths: BOS + context +
// question (+ answer prefix) fit in `length` tokens, so a length of 1000 runs on a 1024-token model.
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/sample_runner.h"
#include "harness/shared_prefill.h"
#include "tasks/needle.h"

namespace kvc {

struct EvalContext {
  const LlamaModel& model;
  const Tokenizer& tokenizer;
  QueryMode mode = QueryMode::Aware;
  Truncation truncation = Truncation::Refuse;
  // Non-empty: each sample writes what its compression kept to DIR/<sample id>.safetensors (--dump-kept).
  std::string dump_kept_dir;
  // Prompts longer than this are truncated or refused (LongBench's max_length); 0: the model's context
  // less the generation length.
  int64_t max_prompt_tokens = 0;
  // --bos / --no-bos; by default the tokenizer file decides whether prompts start with BOS.
  BosChoice bos = BosChoice::FromFile;
  // --chat: prompts are one user turn of this chat format; null: the task's text as it is.
  std::shared_ptr<const ChatFormat> chat;
  // Setups sharing a prefill that decode in lockstep (run_sample_shared; kvc-eval sweep --lockstep).
  int64_t lockstep = kDefaultLockstepSetups;
};

// DIR/<sample id>.safetensors, the id's characters outside [A-Za-z0-9._-] replaced by '_'; empty for an empty DIR.
std::string kept_dump_path(const std::string& dir, const std::string& sample_id);

struct SampleRecord {
  std::string id;
  std::string prediction;
  std::vector<std::string> answers;
  double score = 0;
  int64_t prompt_tokens = 0;
  int64_t dropped_tokens = 0;
  double compression_ratio = 0;
  double ram_ratio = 0;  // SampleOutput::ram_ratio
  double seconds = 0;
  nlohmann::json to_json() const;
  // Back from to_json (a resumed run's finished samples); kvc::Error naming the missing field.
  static SampleRecord from_json(const nlohmann::json& j);
};

// One sample of a task, ready to run under any compression: its prompt parts, answers, decoding and
// metric, and the grid cell it belongs to (e.g. {"length": 4096, "depth": 0.5}) for per-cell tables.
struct TaskItem {
  std::string id;
  std::string context_part, question_part;
  std::vector<std::string> answers;
  DecodeOptions decode;
  std::function<double(const std::string&)> score;
  nlohmann::json group;
};

// Runs and scores one item under `setup`.
SampleRecord evaluate_item(const EvalContext& ctx, const CacheSetup& setup, const TaskItem& item);
// The same for every setup, in order, prefilling the prompt once for all that can share it
// (shared_prefill.h): records equal evaluate_item's but for `seconds`, which leave out the shared
// prefill. With --dump-kept each setup runs alone. Setups left unrun once `stop` answers true (asked
// between setups) have no record (nullopt).
std::vector<std::optional<SampleRecord>> evaluate_item_shared(const EvalContext& ctx,
                                                              const std::vector<const CacheSetup*>& setups,
                                                              const TaskItem& item, SharedPrefillCost* cost = nullptr,
                                                              const std::function<bool()>& stop = {});

// Needle answers are numbers: correct when the first run of digits in the prediction is exactly the
// number ("40721." and " 40721 is" are right; "4072", "407219" and "1 40721" are wrong).
bool needle_answer_correct(const std::string& prediction, const std::string& number);

// A per-sample seed from the run seed and the sample's coordinates, so that adding a length or depth
// to a grid leaves the other cells' samples unchanged.
uint64_t sample_seed(uint64_t run_seed, const std::string& coordinates);

struct NeedleGridOptions {
  NeedleSpec spec;
  std::string haystack;  // filler text (see load_haystack)
  std::vector<int64_t> lengths{256, 512};
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};
  int samples = 3;
  uint64_t seed = 0;
  int64_t max_new_tokens = 8;
};

struct NeedleCell {
  int64_t length = 0;
  double depth = 0;
  std::vector<SampleRecord> samples;
  double accuracy() const;
  nlohmann::json to_json() const;
};

// The items of one needle cell: options.samples needles at `depth` in a prompt of `length` tokens.
// Throws kvc::Error naming --lengths when length + max_new_tokens exceeds the model's context.
std::vector<TaskItem> needle_items(const EvalContext& ctx, const NeedleGridOptions& options, int64_t length,
                                   double depth);
// One cell of the grid: its items run under `setup`.
NeedleCell run_needle_cell(const EvalContext& ctx, const CacheSetup& setup, const NeedleGridOptions& options,
                           int64_t length, double depth);

// A generated sample fit to a prompt of `length` tokens: make(context_tokens) is called with the budget
// left after BOS and the question, once more if the question's size moved.
TaskSample fit_sample(const EvalContext& ctx, int64_t length, const std::function<TaskSample(size_t)>& make);

// Runs and scores one sample whose prompt is context_part + question_part; `score` maps the prediction
// to [0, 1].
SampleRecord evaluate_sample(const EvalContext& ctx, const CacheSetup& setup, const std::string& id,
                             const std::string& context_part, const std::string& question_part,
                             const std::vector<std::string>& answers, const DecodeOptions& decode,
                             const std::function<double(const std::string&)>& score);

// The items of `samples` synthetic samples of the named RULER-style task at a prompt length.
std::vector<TaskItem> synthetic_items(const EvalContext& ctx, const std::string& task, int64_t length, int samples,
                                      uint64_t seed, const std::string& haystack, const DecodeOptions& decode);
// Those samples run under `setup`, scored with their metric.
std::vector<SampleRecord> run_synthetic_cell(const EvalContext& ctx, const CacheSetup& setup, const std::string& task,
                                             int64_t length, int samples, uint64_t seed, const std::string& haystack,
                                             const DecodeOptions& decode);

double mean_score(const std::vector<SampleRecord>& records);

}  // namespace kvc
