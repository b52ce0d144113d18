#include "generation/generation.h"

#include <algorithm>
#include <chrono>

#include "cache/kv_cache.h"

#include "util/clock.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/process_stats.h"

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
    cache.reserve(std::min<int64_t>(prompt_len + request.max_new_tokens, c.max_position_embeddings));
  }
  const auto prefill_start = std::chrono::steady_clock::now();
  at::Tensor logits = model.forward(request.prompt, cache, options);
  int next = sampler.sample(logits[0]);
  stats.prefill_seconds = seconds_since(prefill_start);
  stats.kv_after_prefill = cache.footprint();
  stats.kv_peak_resident_bytes = stats.kv_after_prefill.resident_bytes;

  result.stop_reason = "max_new_tokens";
  const auto decode_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < request.max_new_tokens; ++i) {
    result.tokens.push_back(next);
    if (on_token) on_token(next);
    if (request.stop_at_eos && c.is_eos(next)) {
      result.stop_reason = "eos";
      break;
    }
    if (i + 1 == request.max_new_tokens) break;
    if (interrupted()) {
      result.stop_reason = "interrupted";
      break;
    }
    if (!request.allow_past_context && cache.next_position() >= c.max_position_embeddings) {
      result.stop_reason = "context";
      break;
    }
    logits = model.forward({next}, cache, options);
    next = sampler.sample(logits[0]);
    stats.kv_peak_resident_bytes = std::max(stats.kv_peak_resident_bytes, cache.footprint().resident_bytes);
  }
  stats.decode_seconds = seconds_since(decode_start);
  stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  stats.kv_final = cache.footprint();
  stats.peak_rss_bytes = peak_rss_bytes();
  return result;
}

}  // namespace kvc
