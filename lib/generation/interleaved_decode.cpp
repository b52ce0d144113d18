#include "generation/interleaved_decode.h"

#include <chrono>
#include <memory>

#include "cache/kv_cache.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace kvc {
namespace {

struct Sequence {
  KVCache cache;
  std::unique_ptr<ForwardObserver> observer;
  ForwardOptions options;
  InterleavedRun run;
};

int greedy(const at::Tensor& logits) { return static_cast<int>(logits[0].argmax().item<int64_t>()); }

}  // namespace

void check_interleaved_decode(const LlamaModel& model, int64_t prompt_tokens, int64_t steps) {
  KVC_CHECK(prompt_tokens > 0, "the prompt is empty");
  KVC_CHECK(steps > 0, "decode steps must be positive, got {}", steps);
  KVC_CHECK(prompt_tokens + steps <= model.config().max_position_embeddings,
            "{} prompt tokens + {} decode steps exceed the model's context of {}", prompt_tokens, steps,
            model.config().max_position_embeddings);
}

std::vector<InterleavedRun> interleaved_decode(const LlamaModel& model, const std::vector<int>& prompt,
                                               const std::vector<std::pair<std::string, CacheSetup>>& setups,
                                               int64_t steps) {
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  check_interleaved_decode(model, prompt_len, steps);
  std::vector<Sequence> sequences;
  sequences.reserve(setups.size());
  for (const auto& [name, setup] : setups) {
    Sequence s{setup.new_cache(model), setup.new_observer(), {}, {}};
    s.options.all_logits = false;
    s.options.observer = s.observer.get();
    s.run.name = name;
    // As kvc-generate: an uncompressed cache reserves prompt + steps, so no step grows it.
    if (!s.observer) s.cache.reserve(prompt_len + steps);
    const auto start = std::chrono::steady_clock::now();
    s.run.tokens.push_back(greedy(model.forward(prompt, s.cache, s.options)));
    s.run.prefill_seconds = seconds_since(start);
    sequences.push_back(std::move(s));
  }
  for (int64_t i = 0; i < steps && !interrupted(); ++i) {
    for (Sequence& s : sequences) {
      const auto start = std::chrono::steady_clock::now();
      s.run.tokens.push_back(greedy(model.forward({s.run.tokens.back()}, s.cache, s.options)));
      s.run.decode_seconds += seconds_since(start);
      ++s.run.steps;
    }
  }
  std::vector<InterleavedRun> runs;
  for (Sequence& s : sequences) {
    s.run.kv = s.cache.footprint();
    runs.push_back(std::move(s.run));
  }
  return runs;
}

}  // namespace kvc
