// LlamaModel after loading (llama_model_load.cpp): the forward pass, its caches and the weights it reads.
#include "model/llama_model.h"

#include <ATen/Parallel.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "cache/attention.h"
#include "cache/dense_layer_cache.h"
#include "cache/local_window_cache.h"
#include "cache/probe_reduction.h"
#include "kernels/gated_activation.h"
#include "kernels/rms_norm.h"
#include "runtime/blas_threads.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace kvc {
namespace {

// `alongside` (work independent of this product) runs once: on the calling thread while the other
// threads start streaming the weights when decoding on the CPU, else first (LinearWeight::apply).
at::Tensor project(const at::Tensor& x, const LinearWeight& weight, const at::Tensor& bias = {},
                   const std::function<void()>& alongside = {}) {
  return weight.apply(x, bias, alongside);
}

}  // namespace

std::string LlamaModel::weight_format() const {
  if (block_formats_.empty()) return c10::toString(weight_dtype_);
  return fmt::format("gguf blocks ({})", fmt::join(block_formats_, ", "));
}

int64_t LlamaModel::parameter_count() const {
  int64_t n = embed_.numel() + final_norm_.numel() + (lm_head_.same_as(embed_) ? 0 : lm_head_.numel());
  for (const auto& l : layers_) {
    n += l.attn_norm.numel() + l.qkv.numel() + (l.qkv_bias.defined() ? l.qkv_bias.numel() : 0) + l.o_proj.numel() +
         l.mlp_norm.numel() + l.gate_up.numel() + l.down.numel();
    for (const at::Tensor& t : {l.q_norm, l.k_norm, l.post_attn_norm, l.post_mlp_norm})
      n += t.defined() ? t.numel() : 0;
  }
  return n;
}

int64_t LlamaModel::weight_bytes() const {
  // A decode step reads every weight once except the embedding table (one row).
  int64_t bytes = 0;
  for (const at::Tensor& t : decode_weights()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

std::vector<at::Tensor> LlamaModel::decode_weights() const {
  std::vector<at::Tensor> weights;
  const auto add = [&](const LinearWeight& w) {
    for (const at::Tensor& t : w.streamed()) weights.push_back(t);
  };
  for (const LayerWeights& l : layers_) {
    for (const at::Tensor& t :
         {l.attn_norm, l.qkv_bias, l.mlp_norm, l.q_norm, l.k_norm, l.post_attn_norm, l.post_mlp_norm}) {
      if (t.defined()) weights.push_back(t);
    }
    for (const LinearWeight* w : {&l.qkv, &l.o_proj, &l.gate_up, &l.down}) add(*w);
  }
  weights.push_back(final_norm_);
  add(lm_head_);
  return weights;
}

std::shared_ptr<const Rope> LlamaModel::rope_for_layer(int64_t layer) const {
  return config_.is_local_layer(layer) ? rope_local_ : rope_;
}

LayerCacheFactory LlamaModel::dense_layer_factory() const { return dense_layer_factory(cache_types_); }

LayerCacheFactory LlamaModel::dense_layer_factory(CacheTypes types) const {
  const AttentionShape shape = config_.attention_shape();
  const auto options = at::TensorOptions().dtype(dtype_).device(device_);
  auto rope = rope_;
  return
      [shape, options, rope, types](int64_t) { return std::make_unique<DenseLayerCache>(shape, rope, options, types); };
}

// Local (sliding-window) layers always get a dense cache bounded by their window: compression and the
// factory's budgets act on the global layers only.
KVCache LlamaModel::new_cache(const LayerCacheFactory& factory) const { return new_cache(factory, cache_types_); }

KVCache LlamaModel::new_cache(const LayerCacheFactory& factory, CacheTypes local_types) const {
  std::vector<std::unique_ptr<LayerCache>> layers;
  const AttentionShape local = config_.local_attention_shape();
  const auto options = at::TensorOptions().dtype(dtype_).device(device_);
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    if (config_.is_local_layer(i)) {
      layers.push_back(std::make_unique<LocalWindowCache>(local, rope_local_, options, local_types));
    } else {
      layers.push_back(factory(i));
    }
  }
  return KVCache(std::move(layers));
}

KVCache LlamaModel::new_cache() const { return new_cache(dense_layer_factory()); }

KVCache LlamaModel::full_precision_cache() const { return typed_cache({dtype_, dtype_}); }

KVCache LlamaModel::typed_cache(CacheTypes types) const { return new_cache(dense_layer_factory(types), types); }

at::Tensor LlamaModel::rms_norm(const at::Tensor& x, const at::Tensor& weight) const {
  if (const at::Tensor y = fast_rms_norm(x, weight, config_.rms_norm_eps); y.defined()) return y;
  // As Hugging Face: normalise in float32, cast back, then scale.
  const at::Tensor xf = x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + config_.rms_norm_eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor LlamaModel::attend_layer(int64_t layer, const at::Tensor& qkv, const at::Tensor& positions, KVCache& cache,
                                    const ForwardOptions& options, int64_t prompt_tokens, LayerStep& step) const {
  const LayerWeights& l = layers_[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const int64_t T = qkv.size(0), d = c.head_dim, q_dim = c.num_heads * d, kv_dim = c.kv_dim();
  at::Tensor q = qkv.narrow(1, 0, q_dim).view({T, c.num_heads, d}).transpose(0, 1);
  at::Tensor k = qkv.narrow(1, q_dim, kv_dim).view({T, c.num_kv_heads, d}).transpose(0, 1);
  const at::Tensor v = qkv.narrow(1, q_dim + kv_dim, kv_dim).view({T, c.num_kv_heads, d}).transpose(0, 1);
  if (l.q_norm.defined()) {
    q = rms_norm(q.reshape({-1, d}), l.q_norm).view({c.num_heads, T, d});
    k = rms_norm(k.reshape({-1, d}), l.k_norm).view({c.num_kv_heads, T, d});
  }
  // Attention scales scores by 1/sqrt(head_dim); a model that asks for 1/sqrt(s) gets its queries rescaled.
  if (c.query_pre_attn_scalar > 0 && c.query_pre_attn_scalar != static_cast<double>(d)) {
    q = q * std::sqrt(static_cast<double>(d) / c.query_pre_attn_scalar);
  }
  const at::Tensor q_rot = rope_for_layer(layer)->apply(q, positions).contiguous();

  LayerCache& lc = cache.layer(layer);
  ForwardObserver* observer = options.observer;
  const AttentionProbe asked = observer ? observer->probe(layer) : AttentionProbe{};
  const AttentionProbe probe = probe_with_reductions(asked);
  const int64_t P = prompt_tokens > 0 ? prompt_tokens : T;
  at::Tensor attn;  // [H, T, d]
  if (prompt_tokens == 0) {
    lc.append(k, v, positions);
    attn = lc.attend(q_rot, positions, probe, &step.stats);
  } else {
    // The prompt goes through the cache as in any prefill. The scoring tokens' queries attend to the
    // prompt and to themselves outside it (so no layout ever holds them), and only they give the
    // statistics, over the prompt's entries.
    KVC_CHECK(!probe.column_sums && !probe.group_square_sums,
              "a pass with scoring tokens gives window statistics only");
    lc.append(k.narrow(1, 0, P), v.narrow(1, 0, P), positions.narrow(0, 0, P));
    const at::Tensor prompt_attn = lc.attend(q_rot.narrow(1, 0, P), positions.narrow(0, 0, P), {}, nullptr);
    AttentionProbe scoring_probe = probe;
    scoring_probe.window = std::min(probe.window, T - P);
    const AttentionShape shape = c.is_local_layer(layer) ? c.local_attention_shape() : c.attention_shape();
    const at::Tensor scoring_attn =
        grouped_attention(shape, q_rot.narrow(1, P, T - P), positions.narrow(0, P, T - P),
                          rope_for_layer(layer)->apply(k, positions).contiguous(), v.contiguous(),
                          positions.unsqueeze(0).expand({c.num_kv_heads, T}).contiguous(), scoring_probe, &step.stats);
    attn = at::cat({prompt_attn, scoring_attn}, 1);
    if (step.stats.window_probs.defined()) step.stats.window_probs = step.stats.window_probs.narrow(2, 0, P);
  }
  reduce_probe_statistics(asked, c.num_kv_heads, step.stats);
  if (observer) {
    step.layer = layer;
    step.keys = k.narrow(1, 0, P);
    step.values = v.narrow(1, 0, P);
    step.queries = q_rot.narrow(1, 0, P);
    step.positions = positions.narrow(0, 0, P);
    step.rope = rope_for_layer(layer).get();
    step.output_projection = &l.o_proj;
  }
  return attn.transpose(0, 1).reshape({T, q_dim});
}

at::Tensor LlamaModel::attention_block(int64_t layer, const at::Tensor& x, const at::Tensor& positions, KVCache& cache,
                                       const ForwardOptions& options, int64_t prompt_tokens) const {
  const LayerWeights& l = layers_[static_cast<size_t>(layer)];
  const at::Tensor qkv = project(rms_norm(x, l.attn_norm), l.qkv, l.qkv_bias);  // [T, q+2kv]
  LayerStep step;
  const at::Tensor heads = attend_layer(layer, qkv, positions, cache, options, prompt_tokens, step);
  std::function<void()> observe;
  if (ForwardObserver* observer = options.observer) {
    // The observer (a press's eviction, say) changes only what later steps read, not this layer's
    // output: while decoding, it runs as the output projection's weights start streaming.
    observe = [&] { observer->after_attention(step, cache); };
  }
  const at::Tensor out = project(heads, l.o_proj, {}, observe);
  return l.post_attn_norm.defined() ? rms_norm(out, l.post_attn_norm) : out;
}

at::Tensor LlamaModel::mlp_block(int64_t layer, const at::Tensor& x, bool lockstep) const {
  const LayerWeights& l = layers_[static_cast<size_t>(layer)];
  const int64_t inter = config_.intermediate_size;
  const at::Tensor normed = rms_norm(x, l.mlp_norm);
  const at::Tensor gate_up = lockstep ? l.gate_up.apply_each(normed) : project(normed, l.gate_up);
  at::Tensor act = fast_gated_activation(gate_up, inter, config_.traits.gelu_tanh_mlp);
  if (!act.defined()) {
    const at::Tensor gate = gate_up.narrow(1, 0, inter);
    act = (config_.traits.gelu_tanh_mlp ? at::gelu(gate, "tanh") : at::silu(gate)) * gate_up.narrow(1, inter, inter);
  }
  const at::Tensor out = lockstep ? l.down.apply_each(act) : project(act, l.down);
  return l.post_mlp_norm.defined() ? rms_norm(out, l.post_mlp_norm) : out;
}

at::Tensor LlamaModel::forward(const std::vector<int>& tokens, KVCache& cache, const ForwardOptions& options) const {
  KVC_CHECK(!tokens.empty(), "forward: no tokens to run");
  KVC_CHECK(cache.num_layers() == config_.num_layers, "forward: cache has {} layers, model has {}", cache.num_layers(),
            config_.num_layers);
  const auto T = static_cast<int64_t>(tokens.size());
  const int64_t first = cache.next_position();
  const std::vector<int> scoring = options.observer != nullptr && first == 0 && T > 1
                                       ? options.observer->scoring_tokens(tokens)
                                       : std::vector<int>{};
  const bool scored = !scoring.empty();
  // Our kernels split the work over LibTorch's threads; OpenBLAS's own pool would only fight them.
  set_blas_threads(device_.is_cpu() ? 1 : at::get_num_threads());
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  ids.insert(ids.end(), scoring.begin(), scoring.end());
  const auto fed = static_cast<int64_t>(ids.size());
  for (int64_t id : ids) {
    KVC_CHECK(id >= 0 && id < config_.vocab_size, "token id {} is outside the model's vocabulary (size {})", id,
              config_.vocab_size);
  }
  const at::Tensor id_tensor = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).to(device_);
  // On a GPU the positions are made there: a host tensor would be copied, and the GPU waited for, in
  // every layer's RoPE and attention.
  rope_->reserve(first + fed - 1);
  if (rope_local_) rope_local_->reserve(first + fed - 1);
  const at::Tensor positions = at::arange(first, first + fed, at::TensorOptions().dtype(at::kLong).device(device_));
  at::Tensor x = embed_.lookup_rows(id_tensor).to(dtype_);
  if (config_.traits.scaled_embeddings) x = x * embedding_scale_;
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    if ((options.stop_on_interrupt && interrupted()) || (options.stop && options.stop()))
      throw InterruptedError(
          fmt::format("interrupted during a pass over {} tokens, at layer {} of {}", fed, i, config_.num_layers));
    x = x + attention_block(i, x, positions, cache, options, scored ? T : 0);
    x = x + mlp_block(i, x);
    if (options.on_layer) options.on_layer(i + 1, config_.num_layers);
  }
  cache.advance(T);
  if (scored) x = x.narrow(0, 0, T);
  if (!options.all_logits) x = x.narrow(0, T - 1, 1);
  const at::Tensor logits = project(rms_norm(x, final_norm_), lm_head_);
  return logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
}

}  // namespace kvc
