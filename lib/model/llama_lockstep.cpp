// LlamaModel::forward_lockstep: one decode step of several sequences, each with its own cache and
// observer, sharing every read of the weights. A sweep decodes dozens of compressed caches of the same
// prompt; one at a time, each of their steps streams every weight matrix (Gemma 3 270M in float32: 1 GB a
// step). Here each matrix streams once per step for all of them, and everything that is not a product
// with the weights (norms, RoPE, the cache's attention, the observer) runs per sequence exactly as in
// forward, so each sequence's logits are the ones forward would return.
#include <algorithm>

#include "model/llama_model.h"
#include "runtime/blas_threads.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace kvc {

at::Tensor LlamaModel::forward_lockstep(const std::vector<int>& tokens, const std::vector<KVCache*>& caches,
                                        const std::vector<ForwardOptions>& options) const {
  const auto B = static_cast<int64_t>(tokens.size());
  KVC_CHECK(B >= 1, "forward_lockstep: no sequences to run");
  KVC_CHECK(caches.size() == tokens.size() && options.size() == tokens.size(),
            "forward_lockstep: {} tokens, {} caches and {} options (one of each per sequence)", tokens.size(),
            caches.size(), options.size());
  for (size_t b = 0; b < caches.size(); ++b) {
    const KVCache* cache = caches[b];
    KVC_CHECK(cache != nullptr && cache->num_layers() == config_.num_layers,
              "forward_lockstep: a cache of {} layers for a model of {}", cache ? cache->num_layers() : 0,
              config_.num_layers);
    KVC_CHECK(std::find(caches.begin(), caches.begin() + static_cast<int64_t>(b), cache) ==
                  caches.begin() + static_cast<int64_t>(b),
              "forward_lockstep: sequence {} shares its cache with an earlier one", b);
  }
  // One sequence, or off the CPU (no shared products there): each step on its own.
  if (B == 1 || !device_.is_cpu()) {
    std::vector<at::Tensor> logits;
    for (int64_t b = 0; b < B; ++b) {
      ForwardOptions single = options[static_cast<size_t>(b)];
      single.all_logits = false;
      logits.push_back(forward({tokens[static_cast<size_t>(b)]}, *caches[static_cast<size_t>(b)], single));
    }
    return at::cat(logits);
  }
  set_blas_threads(1);
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  for (int64_t id : ids) {
    KVC_CHECK(id >= 0 && id < config_.vocab_size, "token id {} is outside the model's vocabulary (size {})", id,
              config_.vocab_size);
  }
  std::vector<at::Tensor> positions;
  int64_t last = 0;
  bool stop_on_interrupt = false;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = caches[static_cast<size_t>(b)]->next_position();
    positions.push_back(at::arange(first, first + 1, at::TensorOptions().dtype(at::kLong)));
    last = std::max(last, first);
    stop_on_interrupt |= options[static_cast<size_t>(b)].stop_on_interrupt;
  }
  rope_->reserve(last);
  if (rope_local_) rope_local_->reserve(last);
  at::Tensor x = embed_.lookup_rows(at::tensor(ids, at::TensorOptions().dtype(at::kLong))).to(dtype_);
  if (config_.traits.scaled_embeddings) x = x * embedding_scale_;
  std::vector<LayerStep> steps(static_cast<size_t>(B));
  std::vector<at::Tensor> heads(static_cast<size_t>(B));
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    if (stop_on_interrupt && interrupted())
      throw InterruptedError(fmt::format("interrupted during a lockstep step of {} sequences, at layer {} of {}", B, i,
                                         config_.num_layers));
    const LayerWeights& l = layers_[static_cast<size_t>(i)];
    const at::Tensor qkv = l.qkv.apply_each(rms_norm(x, l.attn_norm), l.qkv_bias);  // [B, q+2kv]
    bool observed = false;
    for (int64_t b = 0; b < B; ++b) {
      const auto s = static_cast<size_t>(b);
      steps[s] = LayerStep{};
      heads[s] = attend_layer(i, qkv.narrow(0, b, 1), positions[s], *caches[s], options[s], 0, steps[s]);
      observed |= options[s].observer != nullptr;
    }
    // Each observer runs where forward runs it: on the calling thread while the output projection streams.
    std::function<void()> observe;
    if (observed) {
      observe = [&] {
        for (int64_t b = 0; b < B; ++b) {
          const auto s = static_cast<size_t>(b);
          if (options[s].observer) options[s].observer->after_attention(steps[s], *caches[s]);
        }
      };
    }
    at::Tensor out = l.o_proj.apply_each(at::cat(heads), {}, observe);
    if (l.post_attn_norm.defined()) out = rms_norm(out, l.post_attn_norm);
    x = x + out;
    x = x + mlp_block(i, x, /*lockstep=*/true);
  }
  for (KVCache* cache : caches) cache->advance(1);
  const at::Tensor logits = lm_head_.apply_each(rms_norm(x, final_norm_));
  return logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
}

}  // namespace kvc
