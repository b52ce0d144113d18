#include "generation/generation.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "cache/kv_cache.h"
#include "generation/aten_op_counter.h"
#include "generation/decode_loop.h"

#include "util/clock.h"
#include "util/error.h"
#include "util/process_stats.h"
#include "util/progress.h"

namespace kvc {

GenerationResult generate(const LlamaModel& model, KVCache& cache, const GenerationRequest& request,
                          const std::function<void(int)>& on_token, ForwardObserver* observer) {
  const ModelConfig& c = model.config();
  const auto prompt_len = static_cast<int64_t>(request.prompt.size());
  KVC_CHECK(prompt_len > 0, "the prompt is empty");
  KVC_CHECK(request.max_new_tokens >= 0, "--max-new-tokens must be >= 0");
  KVC_CHECK(cache.next_position() + prompt_len <= c.max_position_embeddings,
            "the prompt has {} tokens but the model's context is {} (max_position_embeddings); shorten the prompt",
            cache.next_position() + prompt_len, c.max_position_embeddings);

  GenerationResult result;
  GenerationStats& stats = result.stats;
  stats.prompt_tokens = prompt_len;
  Sampler sampler(request.sampling);
  ForwardOptions options;
  options.all_logits = false;
  options.observer = observer;

  // An uncompressed cache will hold prompt + new tokens: reserving them before prefill avoids growing
  // it while decoding, where a larger allocation and a copy of the whole cache would land in one step.
  // Compression methods manage their own capacity.
  if (observer == nullptr) {
    cache.reserve(
        std::min<int64_t>(cache.next_position() + prompt_len + request.max_new_tokens, c.max_position_embeddings));
  }
  const auto prefill_start = std::chrono::steady_clock::now();
  ForwardOptions prefill = options;
  prefill.stop_on_interrupt = true;  // a long prompt's prefill stops between layers; a decode step, after it
  std::optional<Progress> progress;
  if (request.show_prefill_progress) {
    progress.emplace(fmt::format("prefill {} tokens", prompt_len), c.num_layers, "layers", true,
                     /*quiet_for_seconds=*/1.0);
    prefill.on_layer = [&](int64_t done, int64_t) { progress->set(done); };
  }
  const at::Tensor logits = model.forward(request.prompt, cache, prefill);
  if (progress) progress->finish();
  stats.prefill_seconds = seconds_since(prefill_start);
  stats.kv_after_prefill = cache.footprint();
  stats.kv_peak_resident_bytes = stats.kv_after_prefill.resident_bytes;

  DecodeLimits limits;
  limits.max_new_tokens = request.max_new_tokens;
  limits.stop_at_eos = request.stop_at_eos;
  limits.allow_past_context = request.allow_past_context;
  limits.stop_on_interrupt = true;
  std::optional<AtenOpCounter> ops;
  if (request.count_ops) ops.emplace();
  const auto decode_start = std::chrono::steady_clock::now();
  result.stop_reason = run_decode_loop(
      model, cache, logits, limits, options, [&](const at::Tensor& l) { return sampler.sample(l[0]); },
      [&](int token) {
        result.tokens.push_back(token);
        if (on_token) on_token(token);
        return std::string();
      },
      [&] { stats.kv_peak_resident_bytes = std::max(stats.kv_peak_resident_bytes, cache.resident_bytes()); });
  stats.decode_seconds = seconds_since(decode_start);
  if (ops) {
    stats.decode_aten_ops = ops->count();
    stats.decode_aten_ops_by_name = ops->count_by_name();
  }
  stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  stats.kv_final = cache.footprint();
  stats.peak_rss_bytes = peak_rss_bytes();
  return result;
}

}  // namespace kvc
