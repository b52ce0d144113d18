// LlamaModel::load: a checkpoint folder or GGUF file to weights in memory, checked against the config.
#include "model/llama_model.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "io/generation_config.h"
#include "io/gguf_finite.h"
#include "io/gguf_reader.h"
#include "io/safetensors.h"
#include "kernels/block_matrix.h"
#include "kernels/half_precision.h"
#include "model/gguf_config.h"
#include "model/gguf_weights.h"
#include "model/tensor_bridge.h"
#include "runtime/huge_page_allocator.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc {
namespace {

// The weights' storage type: `auto` keeps a checkpoint's 16-bit weights in 16 bits (and fp32 as fp32).
at::ScalarType parse_dtype_option(const std::string& dtype, const std::string& stored) {
  const std::string d = dtype == "auto" ? stored : dtype;
  if (d == "float32") return at::kFloat;
  if (d == "float16") return at::kHalf;
  if (d == "bfloat16") return at::kBFloat16;
  if (d == "float64") return at::kDouble;  // for exactness checks against float64 references
  fail("unknown dtype '{}' (expected auto, float32, float64, float16 or bfloat16)", d);
}

at::Device parse_device(const std::string& device) {
  if (device == "cpu") return at::kCPU;
  if (device == "cuda") {
    KVC_CHECK(at::hasCUDA(), "--device cuda: this build of LibTorch has no CUDA support or no GPU is visible");
    return at::Device(at::kCUDA, 0);
  }
  fail("unknown device '{}' (expected cpu or cuda)", device);
}

// Loads one tensor and checks its shape against what the config implies.
class SafetensorsWeights : public WeightSource {
 public:
  SafetensorsWeights(const st::Checkpoint& checkpoint, std::string dir, at::ScalarType dtype, at::Device device)
      : checkpoint_(checkpoint), dir_(std::move(dir)), dtype_(dtype), device_(device) {}
  bool contains(const std::string& name) const override { return checkpoint_.contains(name); }
  bool norms_include_unit_offset() const override { return false; }

  at::Tensor get(const std::string& name, const std::vector<int64_t>& shape) const override {
    KVC_CHECK(checkpoint_.contains(name), "{}: missing tensor '{}' (is this a {}-style checkpoint?)", dir_, name,
              "Hugging Face Llama");
    const auto& info = checkpoint_.info(name);
    KVC_CHECK(info.shape == shape, "{}: tensor '{}' has shape [{}], but config.json implies [{}]", dir_, name,
              fmt::join(info.shape, ", "), fmt::join(shape, ", "));
    const at::Tensor t = load_tensor(checkpoint_, name, dtype_, device_);
    // On CPU, fp32 tensors are zero-copy views of the mapped file (4 KiB page-cache pages); an owned
    // copy lands in huge pages, which a decode step streams markedly faster.
    return device_.is_cpu() && t.numel() * t.element_size() >= (int64_t{4} << 20) ? t.clone() : t;
  }

 private:
  const st::Checkpoint& checkpoint_;
  std::string dir_;
  at::ScalarType dtype_;
  at::Device device_;
};

// RMSNorm weights as the forward pass multiplies by them, in the activations' dtype: Gemma's (1 + w) is
// stored as one tensor, computed in that dtype as Hugging Face does.
at::Tensor norm_weight(const WeightSource& w, const ModelConfig& c, const std::string& name, int64_t size,
                       at::ScalarType activations) {
  const at::Tensor t = w.get(name, {size}).to(activations);
  return c.traits.unit_offset_norms && !w.norms_include_unit_offset() ? t + 1 : t;
}

// The matrices of one projection (q, k, v; gate, up; or one), stacked: a matrix of GGUF blocks read in
// place when `blocks` is set and one of them is block-quantized, else the dense tensors concatenated.
struct MatrixPart {
  std::string name;
  int64_t rows;
};

LinearWeight matrix(const WeightSource& w, const GgufWeights* blocks, const std::vector<MatrixPart>& parts,
                    int64_t cols, std::vector<std::string>& formats) {
  const bool in_blocks = blocks != nullptr && std::any_of(parts.begin(), parts.end(), [&](const MatrixPart& p) {
                           return blocks->is_quantized(p.name);
                         });
  if (!in_blocks) {
    std::vector<at::Tensor> dense;
    for (const MatrixPart& p : parts) dense.push_back(w.get(p.name, {p.rows, cols}));
    return dense.size() == 1 ? dense[0].contiguous() : at::cat(dense);
  }
  auto m = std::make_shared<BlockMatrix>(cols, blocks->file());
  for (const MatrixPart& p : parts) {
    GgufWeights::StoredRows rows = blocks->stored_rows(p.name, {p.rows, cols});
    const std::string name = block_format(rows.type).name;
    if (std::find(formats.begin(), formats.end(), name) == formats.end()) formats.push_back(name);
    m->append(rows.type, rows.data, rows.rows, std::move(rows.output_rows));
  }
  return LinearWeight(std::shared_ptr<const BlockMatrix>(std::move(m)));
}

}  // namespace

std::shared_ptr<LlamaModel> LlamaModel::load(const std::string& dir, const LoadOptions& options) {
  const bool gguf_file = gguf::is_gguf_file(dir);
  KVC_CHECK(gguf_file || is_directory(dir), "model folder not found: '{}'", dir);
  std::shared_ptr<LlamaModel> model(new LlamaModel());
  model->dir_ = dir;
  std::shared_ptr<const gguf::GgufFile> gguf;
  if (gguf_file) {
    gguf = gguf::GgufFile::open(dir);
    model->config_ = model_config_from_gguf(*gguf);
    gguf::check_all_finite(*gguf);  // as the safetensors path refuses NaN and infinity
  } else {
    model->config_ = ModelConfig::from_file(dir + "/config.json");
    const std::string generation_path = dir + "/generation_config.json";
    if (file_exists(generation_path))
      model->config_.add_stop_ids(read_generation_config(generation_path).eos_ids, generation_path);
  }
  const ModelConfig& c = model->config_;
  model->device_ = parse_device(options.device);
  // A GGUF's quantized blocks stay in their blocks on the CPU (dtype auto); the GPU path dequantizes
  // them to bf16 at load.
  const bool stored_16_bits = c.torch_dtype == "float16" || c.torch_dtype == "bfloat16";
  const bool keep_blocks = gguf && options.dtype == "auto" && model->device_.is_cpu();
  model->weight_dtype_ = parse_dtype_option(options.dtype, stored_16_bits                     ? c.torch_dtype
                                                           : gguf && !model->device_.is_cpu() ? "bfloat16"
                                                                                              : "float32");
  // On CPU 16-bit weights stay 16-bit in memory and the kernels widen them in registers; activations
  // and the cache stay fp32. On CUDA everything runs in the weights' dtype.
  model->dtype_ = model->device_.is_cpu() && is_half_type(model->weight_dtype_) ? at::kFloat : model->weight_dtype_;
  model->cache_types_ = options.cache_types.resolved(model->dtype_);
  check_cache_types_fit(model->cache_types_, c.head_dim, model->device_);

  if (model->device_.is_cpu()) install_huge_page_allocator();
  std::optional<st::Checkpoint> checkpoint;
  std::unique_ptr<WeightSource> source;
  if (gguf) {
    const std::pair<int64_t, int64_t> interleaved = c.traits.gguf_qk_rows_interleaved
                                                        ? std::make_pair(c.num_heads, c.num_kv_heads)
                                                        : std::make_pair(int64_t{0}, int64_t{0});
    source = std::make_unique<GgufWeights>(gguf, c.traits.unit_offset_norms, model->weight_dtype_, model->device_,
                                           interleaved);
  } else {
    checkpoint.emplace(st::Checkpoint::open_dir(dir));
    source = std::make_unique<SafetensorsWeights>(*checkpoint, dir, model->weight_dtype_, model->device_);
  }
  const WeightSource& w = *source;
  // A config that counts fewer layers than the file holds would drop the rest without a word.
  KVC_CHECK(!w.contains(fmt::format("model.layers.{}.input_layernorm.weight", c.num_layers)),
            "{}: the weights hold more than the {} layers the model's config gives (num_hidden_layers or "
            "block_count); the config does not belong to these weights",
            dir, c.num_layers);
  const GgufWeights* blocks = keep_blocks ? static_cast<const GgufWeights*>(source.get()) : nullptr;
  std::vector<std::string>& formats = model->block_formats_;
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.kv_dim(), inter = c.intermediate_size;
  const at::ScalarType act = model->dtype_;
  model->embed_ = matrix(w, blocks, {{"model.embed_tokens.weight", c.vocab_size}}, h, formats);
  model->final_norm_ = norm_weight(w, c, "model.norm.weight", h, act);
  if (c.traits.scaled_embeddings) {
    // As Hugging Face: sqrt(hidden) rounded to the activations' dtype first (block rows become fp32).
    const at::ScalarType embedding_type = model->embed_.is_blocks() ? at::kFloat : model->embed_.dense().scalar_type();
    const at::Tensor scale =
        at::scalar_tensor(std::sqrt(static_cast<double>(h)), at::TensorOptions().dtype(embedding_type));
    model->embedding_scale_ = scale.item().toDouble();
  }
  if (c.tie_word_embeddings || !w.contains("lm_head.weight")) {
    KVC_CHECK(c.tie_word_embeddings, "{}: missing tensor 'lm_head.weight' and tie_word_embeddings is false", dir);
    model->lm_head_ = model->embed_;
  } else {
    model->lm_head_ = matrix(w, blocks, {{"lm_head.weight", c.vocab_size}}, h, formats);
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LayerWeights l;
    l.attn_norm = norm_weight(w, c, p + "input_layernorm.weight", h, act);
    // Stacking q/k/v (and gate/up) turns three matrix-vector products into one per decode step.
    l.qkv = matrix(
        w, blocks,
        {{p + "self_attn.q_proj.weight", q}, {p + "self_attn.k_proj.weight", kv}, {p + "self_attn.v_proj.weight", kv}},
        h, formats);
    if (c.qkv_bias) {
      l.qkv_bias = at::cat({w.get(p + "self_attn.q_proj.bias", {q}), w.get(p + "self_attn.k_proj.bias", {kv}),
                            w.get(p + "self_attn.v_proj.bias", {kv})})
                       .to(act);
    }
    l.o_proj = matrix(w, blocks, {{p + "self_attn.o_proj.weight", h}}, q, formats);
    if (c.traits.sandwich_norms) {
      l.post_attn_norm = norm_weight(w, c, p + "post_attention_layernorm.weight", h, act);
      l.mlp_norm = norm_weight(w, c, p + "pre_feedforward_layernorm.weight", h, act);
      l.post_mlp_norm = norm_weight(w, c, p + "post_feedforward_layernorm.weight", h, act);
    } else {
      l.mlp_norm = norm_weight(w, c, p + "post_attention_layernorm.weight", h, act);
    }
    if (c.traits.qk_norms) {
      l.q_norm = norm_weight(w, c, p + "self_attn.q_norm.weight", c.head_dim, act);
      l.k_norm = norm_weight(w, c, p + "self_attn.k_norm.weight", c.head_dim, act);
    }
    l.gate_up = matrix(w, blocks, {{p + "mlp.gate_proj.weight", inter}, {p + "mlp.up_proj.weight", inter}}, h, formats);
    l.down = matrix(w, blocks, {{p + "mlp.down_proj.weight", h}}, inter, formats);
    model->layers_.push_back(std::move(l));
  }
  // A model whose weights stay in GGUF blocks keeps its cache in f16 unless asked otherwise, as
  // llama.cpp does (docs/gguf-block-weights.md measures the choice).
  if (!model->block_formats_.empty()) {
    if (options.cache_types.keys == at::ScalarType::Undefined) model->cache_types_.keys = at::kHalf;
    if (options.cache_types.values == at::ScalarType::Undefined) model->cache_types_.values = at::kHalf;
  }
  model->rope_ = std::make_shared<Rope>(c, model->device_);
  if (!c.local_layers.empty()) {
    ModelConfig local = c;
    local.rope_theta = c.rope_local_theta;
    local.rope_scaling = RopeScaling{};  // scaling stretches the global layers' long range only
    model->rope_local_ = std::make_shared<Rope>(local, model->device_);
  }
  return model;
}

}  // namespace kvc
