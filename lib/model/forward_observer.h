#pragma once
// A hook into the forward pass, layer by layer: how compression methods see attention statistics at
// prefill and act on a layer's cache right after it was filled (before the next layer runs).
#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "cache/kept_record.h"
#include "cache/kv_cache.h"

namespace kvc {

class Rope;
class LinearWeight;

// What the layer just computed for the new tokens.
struct LayerStep {
  int64_t layer = 0;
  at::Tensor keys;       // pre-RoPE [n_kv, T, d]
  at::Tensor values;     // [n_kv, T, d]
  at::Tensor queries;    // rotated [n_heads, T, d]
  at::Tensor positions;  // [T]
  AttentionStats stats;  // what probe() asked for
  // The layer's own parts, for scorers that read more than the step's tensors: its RoPE (rotated keys,
  // future positions) and its output projection W_o [hidden, n_heads * d]. Owned by the model; null
  // where a caller builds a step of its own.
  const Rope* rope = nullptr;
  const LinearWeight* output_projection = nullptr;
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  virtual AttentionProbe probe(int64_t layer) const { return {}; }
  // Called on the forward pass's thread after each layer's attention. While decoding on the CPU, the
  // other threads are meanwhile streaming the layer's output projection: an observer may change the
  // cache (what later steps read) but must not start parallel work of its own (it would run on one
  // thread).
  virtual void after_attention(const LayerStep& step, KVCache& cache) = 0;

  // The next forward pass continues the prompt (a question fed after the compressed context): an
  // observer that bounds the cache keeps that pass whole instead of evicting for it.
  virtual void hold_next_pass() {}
  // The next forward pass is a new prompt of the sequence (a conversation's next turn): an observer that
  // compresses prompts compresses that one too.
  virtual void next_pass_is_prompt() {}
  // Tokens fed after a prompt only to score it (a method that ranks the context by the attention a
  // second copy of it, or a question about it, pays to it). Asked before a prefill into an empty
  // cache: the model runs the prompt and these tokens in one pass, caches the prompt alone, hands the
  // observer the prompt's own step with the statistics of the scoring tokens' queries over the
  // prompt's entries, and returns the prompt's logits. Empty: an ordinary prefill.
  virtual std::vector<int> scoring_tokens(const std::vector<int>& prompt) const { return {}; }
  // What records the entries a compression keeps (--dump-kept); null for observers that keep everything.
  virtual KeptRecorder* kept_recorder() { return nullptr; }
};

struct ForwardOptions {
  bool all_logits = true;               // false: logits of the last token only
  ForwardObserver* observer = nullptr;  // not owned
  // Ctrl-C stops a long pass between layers (an error naming the layer); the cache is then unusable.
  bool stop_on_interrupt = false;
  // Asked between layers as well, when given: true stops the pass the same way (a caller's own stop, e.g. a
  // sweep asked to stop between its cells).
  std::function<bool()> stop;
  // Called after each layer with (layers done, layers): a long prefill's progress.
  std::function<void(int64_t, int64_t)> on_layer;
};

}  // namespace kvc
