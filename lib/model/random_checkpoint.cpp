#include "model/random_checkpoint.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <fmt/format.h>

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

std::vector<std::string> checkpoint_preset_names() { return {"llama-125m", "tinyllama-1.1b", "llama2-7b-1layer"}; }

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
  ShardedWriter(std::string dir, int64_t max_shard_bytes) : dir_(std::move(dir)), max_bytes_(max_shard_bytes) {}

  void add(const std::string& name, const at::Tensor& t) {
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (max_bytes_ > 0 && pending_bytes_ > 0 && pending_bytes_ + bytes > max_bytes_) flush();
    pending_.emplace_back(name, t);
    pending_bytes_ += bytes;
  }

  void finish() {
    flush();
    if (shards_.size() == 1 && max_bytes_ <= 0) {
      KVC_CHECK(std::rename((dir_ + "/" + shards_[0]).c_str(), (dir_ + "/model.safetensors").c_str()) == 0,
                "cannot rename shard in '{}'", dir_);
      return;
    }
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", nlohmann::json::object()}};
    for (const auto& [name, shard] : weight_map_) index["weight_map"][name] = final_name(shard);
    for (size_t i = 0; i < shards_.size(); ++i) {
      std::rename((dir_ + "/" + shards_[i]).c_str(), (dir_ + "/" + final_name(i)).c_str());
    }
    write_file_atomic(dir_ + "/model.safetensors.index.json", index.dump(2) + "\n");
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
    const std::string shard = fmt::format("shard-{}.tmp.safetensors", shards_.size());
    writer.write(dir_ + "/" + shard);
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
};

}  // namespace

void write_random_checkpoint(const CheckpointShape& s, const std::string& dir, const RandomCheckpointOptions& o) {
  ::mkdir(dir.c_str(), 0755);
  KVC_CHECK(is_directory(dir), "cannot create folder '{}'", dir);
  const at::ScalarType type = storage_type(s.dtype);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, o.init_std, shape, gen, at::TensorOptions().dtype(at::kFloat)).to(type);
  };
  auto norm_weight = [&] {
    at::Tensor w = at::ones({s.hidden_size}, at::kFloat);
    if (o.norm_noise > 0) w += at::normal(0.0, o.norm_noise, {s.hidden_size}, gen, at::TensorOptions().dtype(at::kFloat));
    return w.to(type);
  };
  const int64_t h = s.hidden_size, q = s.num_heads * s.head_dim, kv = s.num_kv_heads * s.head_dim;
  ShardedWriter writer(dir, o.max_shard_bytes);
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
  if (!o.tokenizer_path.empty()) write_file_atomic(dir + "/tokenizer.model", read_text_file(o.tokenizer_path));
}

}  // namespace kvc
