#include "model/random_checkpoint.h"

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/model_config.h"
#include "io/safetensors.h"
#include "model/tensor_bridge.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc {

CheckpointShape checkpoint_preset(const std::string& name) {
  CheckpointShape s;
  if (name == "llama-125m") return s;  // the defaults: 12 x 768, vocab 32000 (Llama-2 tokenizer)
  if (name == "tinyllama-1.1b") {
    s.hidden_size = 2048;
    s.intermediate_size = 5632;
    s.num_layers = 22;
    s.num_heads = 32;
    s.num_kv_heads = 4;
    s.head_dim = 64;
    s.max_position_embeddings = 2048;
    return s;
  }
  if (name == "llama2-7b-1layer") {
    s.hidden_size = 4096;
    s.intermediate_size = 11008;
    s.num_layers = 1;
    s.num_heads = 32;
    s.num_kv_heads = 32;
    s.head_dim = 128;
    s.max_position_embeddings = 4096;
    return s;
  }
  fail("unknown checkpoint preset '{}' (known: llama-125m, tinyllama-1.1b, llama2-7b-1layer)", name);
}

int64_t parameter_count(const CheckpointShape& s) {
  const int64_t q = s.num_heads * s.head_dim, kv = s.num_kv_heads * s.head_dim;
  const int64_t per_layer = s.hidden_size * (q + 2 * kv) + q * s.hidden_size + 3 * s.hidden_size * s.intermediate_size +
                            2 * s.hidden_size + (s.attention_bias ? q + 2 * kv : 0);
  return s.num_layers * per_layer + s.vocab_size * s.hidden_size * (s.tie_word_embeddings ? 1 : 2) + s.hidden_size;
}

namespace {

nlohmann::json config_json(const CheckpointShape& s) {
  const std::map<std::string, std::string> classes = {
      {"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}};
  KVC_CHECK(classes.count(s.model_type), "unknown model_type '{}'", s.model_type);
  nlohmann::json c = {{"architectures", {classes.at(s.model_type)}},
                      {"model_type", s.model_type},
                      {"hidden_size", s.hidden_size},
                      {"intermediate_size", s.intermediate_size},
                      {"num_hidden_layers", s.num_layers},
                      {"num_attention_heads", s.num_heads},
                      {"num_key_value_heads", s.num_kv_heads},
                      {"head_dim", s.head_dim},
                      {"vocab_size", s.vocab_size},
                      {"max_position_embeddings", s.max_position_embeddings},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", s.rope_theta},
                      {"rope_scaling", s.rope_scaling},
                      {"hidden_act", "silu"},
                      {"tie_word_embeddings", s.tie_word_embeddings},
                      {"attention_bias", s.attention_bias},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2},
                      {"torch_dtype", s.dtype}};
  if (s.sliding_window > 0) {
    c["sliding_window"] = s.sliding_window;
    if (s.model_type == "qwen2") c["use_sliding_window"] = true;
  }
  return c;
}

at::ScalarType storage_type(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "float16") return at::kHalf;
  if (dtype == "bfloat16") return at::kBFloat16;
  fail("unknown dtype '{}' (float32, float16 or bfloat16)", dtype);
}

// Collects tensors and flushes a shard whenever it would exceed the size limit.
class ShardedWriter {
 public:
  // Every file it creates is appended to `written`, so a failed run can remove them.
  ShardedWriter(std::string dir, int64_t max_shard_bytes, std::vector<std::string>& written)
      : dir_(std::move(dir)), max_bytes_(max_shard_bytes), written_(written) {}

  void add(const std::string& name, const at::Tensor& t) {
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (max_bytes_ > 0 && pending_bytes_ > 0 && pending_bytes_ + bytes > max_bytes_) flush();
    pending_.emplace_back(name, t);
    pending_bytes_ += bytes;
  }

  void finish() {
    flush();
    if (max_bytes_ <= 0) return;  // one file, already under its final name
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", nlohmann::json::object()}};
    for (const auto& [name, shard] : weight_map_) index["weight_map"][name] = final_name(shard);
    for (size_t i = 0; i < shards_.size(); ++i) {
      KVC_CHECK(std::rename((dir_ + "/" + shards_[i]).c_str(), (dir_ + "/" + final_name(i)).c_str()) == 0,
                "cannot rename shard in '{}'", dir_);
      written_.push_back(dir_ + "/" + final_name(i));
    }
    write_file_atomic(dir_ + "/model.safetensors.index.json", index.dump(2) + "\n");
    written_.push_back(dir_ + "/model.safetensors.index.json");
  }

 private:
  std::string final_name(size_t shard) const {
    return fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, shards_.size());
  }
  void flush() {
    if (pending_.empty()) return;
    st::SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    for (const auto& [name, t] : pending_) {
      add_tensor(writer, name, t);
      weight_map_.emplace_back(name, shards_.size());
    }
    // Shards get their "-of-N" names once N is known; until then a name that still says what they are,
    // since a failed write reports it.
    const std::string shard = max_bytes_ <= 0 ? std::string("model.safetensors")
                                              : fmt::format("model-{:05d}.safetensors", shards_.size() + 1);
    writer.write(dir_ + "/" + shard);
    written_.push_back(dir_ + "/" + shard);
    shards_.push_back(shard);
    total_bytes_ += pending_bytes_;
    pending_.clear();
    pending_bytes_ = 0;
  }

  std::string dir_;
  int64_t max_bytes_;
  std::vector<std::pair<std::string, at::Tensor>> pending_;
  int64_t pending_bytes_ = 0, total_bytes_ = 0;
  std::vector<std::string> shards_;
  std::vector<std::pair<std::string, size_t>> weight_map_;
  std::vector<std::string>& written_;
};

}  // namespace

void validate_checkpoint_shape(const CheckpointShape& s) {
  const std::pair<const char*, int64_t> sizes[] = {{"hidden_size (--hidden)", s.hidden_size},
                                                   {"intermediate_size (--intermediate)", s.intermediate_size},
                                                   {"num_hidden_layers (--layers)", s.num_layers},
                                                   {"num_attention_heads (--heads)", s.num_heads},
                                                   {"num_key_value_heads (--kv-heads)", s.num_kv_heads},
                                                   {"head_dim (--head-dim)", s.head_dim},
                                                   {"vocab_size (--vocab)", s.vocab_size},
                                                   {"max_position_embeddings (--context)", s.max_position_embeddings}};
  for (const auto& [field, value] : sizes) KVC_CHECK(value > 0, "{} must be at least 1, got {}", field, value);
  KVC_CHECK(s.num_heads % s.num_kv_heads == 0,
            "num_attention_heads (--heads) {} must be a multiple of num_key_value_heads (--kv-heads) {}", s.num_heads,
            s.num_kv_heads);
  KVC_CHECK(s.sliding_window >= 0, "sliding_window must be 0 (off) or positive, got {}", s.sliding_window);
  storage_type(s.dtype);
  // The loader's rules (bounds, even head_dim, rope_theta, model_type) apply to what we are about to write.
  ModelConfig::from_json_text(config_json(s).dump(), "the requested checkpoint shape");
}

void write_random_checkpoint(const CheckpointShape& s, const std::string& dir, const RandomCheckpointOptions& o) {
  validate_checkpoint_shape(s);
  KVC_CHECK(std::isfinite(o.init_std) && o.init_std >= 0, "--init-std must be finite and not negative, got {}",
            o.init_std);
  KVC_CHECK(std::isfinite(o.norm_noise) && o.norm_noise >= 0, "norm noise must be finite and not negative, got {}",
            o.norm_noise);
  const std::string tokenizer = o.tokenizer_path.empty() ? std::string() : read_text_file(o.tokenizer_path);
  check_writable_output_folder(dir);
  // Missing parents are created as mkdir -p would; only the checkpoint folder itself is removed on failure.
  if (const auto parent = std::filesystem::path(dir).parent_path(); !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    KVC_CHECK(!ec, "cannot create folder '{}': {}", parent.string(), ec.message());
  }
  const bool created = ::mkdir(dir.c_str(), 0755) == 0;
  KVC_CHECK(is_directory(dir), "cannot create folder '{}'", dir);
  std::vector<std::string> written;
  try {
    const at::ScalarType type = storage_type(s.dtype);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    auto normal = [&](std::vector<int64_t> shape) {
      return at::normal(0.0, o.init_std, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(type);
    };
    auto norm_weight = [&] {
      at::Tensor w = at::ones({s.hidden_size}, at::kFloat);
      if (o.norm_noise > 0)
        w += at::normal(0.0, o.norm_noise, {s.hidden_size}, gen, at::TensorOptions().dtype(at::kFloat));
      return w.to(type);
    };
    const int64_t h = s.hidden_size, q = s.num_heads * s.head_dim, kv = s.num_kv_heads * s.head_dim;
    ShardedWriter writer(dir, o.max_shard_bytes, written);
    writer.add("model.embed_tokens.weight", normal({s.vocab_size, h}));
    for (int64_t i = 0; i < s.num_layers; ++i) {
      const std::string p = fmt::format("model.layers.{}.", i);
      writer.add(p + "input_layernorm.weight", norm_weight());
      writer.add(p + "self_attn.q_proj.weight", normal({q, h}));
      writer.add(p + "self_attn.k_proj.weight", normal({kv, h}));
      writer.add(p + "self_attn.v_proj.weight", normal({kv, h}));
      if (s.attention_bias || s.model_type == "qwen2") {
        writer.add(p + "self_attn.q_proj.bias", normal({q}));
        writer.add(p + "self_attn.k_proj.bias", normal({kv}));
        writer.add(p + "self_attn.v_proj.bias", normal({kv}));
      }
      writer.add(p + "self_attn.o_proj.weight", normal({h, q}));
      writer.add(p + "post_attention_layernorm.weight", norm_weight());
      writer.add(p + "mlp.gate_proj.weight", normal({s.intermediate_size, h}));
      writer.add(p + "mlp.up_proj.weight", normal({s.intermediate_size, h}));
      writer.add(p + "mlp.down_proj.weight", normal({h, s.intermediate_size}));
    }
    writer.add("model.norm.weight", norm_weight());
    if (!s.tie_word_embeddings) writer.add("lm_head.weight", normal({s.vocab_size, h}));
    writer.finish();
    write_file_atomic(dir + "/config.json", config_json(s).dump(2) + "\n");
    written.push_back(dir + "/config.json");
    if (!o.tokenizer_path.empty()) write_file_atomic(dir + "/tokenizer.model", tokenizer);
  } catch (...) {
    // Half a checkpoint would load as a broken model later; nothing is better. Each write that failed
    // has already removed its own temporary file.
    for (const std::string& path : written) ::unlink(path.c_str());
    if (created) ::rmdir(dir.c_str());
    throw;
  }
}

}  // namespace kvc
