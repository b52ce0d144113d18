#include "core/model_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/gemma3_config.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/json_file.h"

namespace kvc {
namespace {

using nlohmann::json;

// Above every released model (the largest vocabularies are ~256k entries, the longest contexts ~10M
// positions) yet small enough that products of two sizes cannot overflow an int64_t.
constexpr int64_t kMaxSize = int64_t{1} << 24;

int64_t required_positive(const json& j, const char* key, const std::string& src) {
  KVC_CHECK(j.contains(key), "{}: missing required field '{}'", src, key);
  KVC_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() > 0 && j[key].get<int64_t>() <= kMaxSize,
            "{}: field '{}' must be a positive integer of at most {}, got {}", src, key, kMaxSize, j[key].dump());
  return j[key].get<int64_t>();
}

double number_or(const json& j, const char* key, double fallback, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  KVC_CHECK(j[key].is_number(), "{}: field '{}' must be a number", src, key);
  return j[key].get<double>();
}

// A number strictly between `low` and `high` (NaN and infinities fail both comparisons or the bound).
double number_in(const json& j, const char* key, double fallback, double low, double high, const std::string& src) {
  const double value = number_or(j, key, fallback, src);
  KVC_CHECK(std::isfinite(value) && value > low && value < high, "{}: field '{}' is {}, outside ({}, {})", src, key,
            j[key].dump(), low, high);
  return value;
}

// Hugging Face spells SiLU both ways; any other activation would silently compute another model.
std::string activation(const json& j, const std::string& src) {
  if (!j.contains("hidden_act") || j["hidden_act"].is_null()) return "silu";
  KVC_CHECK(j["hidden_act"].is_string(), "{}: field 'hidden_act' must be a string, got {}", src,
            j["hidden_act"].dump());
  const std::string act = j["hidden_act"].get<std::string>();
  KVC_CHECK(act == "silu" || act == "swish", "{}: hidden_act '{}' is not supported (only silu)", src, act);
  return act;
}

bool bool_or(const json& j, const char* key, bool fallback, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  KVC_CHECK(j[key].is_boolean(), "{}: field '{}' must be true or false", src, key);
  return j[key].get<bool>();
}

// transformers 5 writes one `rope_parameters` object (rope_type, rope_theta and the scaling's fields) where
// earlier versions wrote `rope_theta` and `rope_scaling`; Gemma 3 writes one per layer type instead
// (read in gemma3_config.cpp). Returns the flat object, or null.
const json* flat_rope_parameters(const json& j) {
  if (!j.contains("rope_parameters") || !j["rope_parameters"].is_object()) return nullptr;
  const json& r = j["rope_parameters"];
  return r.contains("rope_type") || r.contains("rope_theta") ? &r : nullptr;
}

RopeScaling parse_rope_scaling(const json& j, const std::string& src) {
  RopeScaling s;
  const json* parameters = flat_rope_parameters(j);
  const char* field = parameters != nullptr ? "rope_parameters" : "rope_scaling";
  if (parameters == nullptr && (!j.contains("rope_scaling") || j["rope_scaling"].is_null())) return s;
  const json& r = parameters != nullptr ? *parameters : j["rope_scaling"];
  KVC_CHECK(r.is_object(), "{}: '{}' must be an object or null", src, field);
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  if (parameters != nullptr && !r.contains(type_key)) return s;  // rope_theta alone
  KVC_CHECK(r.contains(type_key) && r[type_key].is_string(), "{}: '{}' lacks 'rope_type'", src, field);
  s.type = r[type_key].get<std::string>();
  KVC_CHECK(s.type == "default" || s.type == "linear" || s.type == "llama3",
            "{}: unsupported rope_scaling type '{}' (supported: default, linear, llama3)", src, s.type);
  s.factor = number_or(r, "factor", 1.0, src);
  KVC_CHECK(std::isfinite(s.factor) && s.factor > 0, "{}: rope_scaling.factor must be positive", src);
  s.low_freq_factor = number_or(r, "low_freq_factor", 1.0, src);
  s.high_freq_factor = number_or(r, "high_freq_factor", 4.0, src);
  s.original_max_position_embeddings =
      static_cast<int64_t>(number_or(r, "original_max_position_embeddings", 8192, src));
  if (s.type == "llama3") {
    KVC_CHECK(s.high_freq_factor > s.low_freq_factor, "{}: rope_scaling needs high_freq_factor > low_freq_factor", src);
  }
  return s;
}

}  // namespace

bool ModelConfig::is_eos(int id) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), id) != eos_token_ids.end();
}

void ModelConfig::add_stop_ids(const std::vector<int>& ids, const std::string& source) {
  for (const int id : ids) {
    KVC_CHECK(id >= 0 && id < vocab_size, "{}: eos_token_id {} is not below the vocabulary size {}", source, id,
              vocab_size);
    if (!is_eos(id)) eos_token_ids.push_back(id);
  }
}

ModelConfig ModelConfig::from_file(const std::string& config_path) {
  const std::string text = read_text_file(config_path);
  ModelConfig c = from_json_text(text, config_path);
  c.config_hash = hash_string(text);
  return c;
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& src) {
  const json j = parse_json_object(text, src);
  ModelConfig c;
  KVC_CHECK(j.contains("model_type") && j["model_type"].is_string(), "{}: missing required field 'model_type'", src);
  c.model_type = j["model_type"].get<std::string>();
  c.traits = architecture_for(c.model_type, src);
  c.hidden_size = required_positive(j, "hidden_size", src);
  c.intermediate_size = required_positive(j, "intermediate_size", src);
  c.num_layers = required_positive(j, "num_hidden_layers", src);
  c.num_heads = required_positive(j, "num_attention_heads", src);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? required_positive(j, "num_key_value_heads", src)
                       : c.num_heads;
  c.vocab_size = required_positive(j, "vocab_size", src);
  c.max_position_embeddings = required_positive(j, "max_position_embeddings", src);
  // Without head_dim the architecture derives it from hidden_size, which must then split evenly; an
  // explicit head_dim may differ from hidden_size / heads (the projections absorb the difference).
  const bool explicit_head_dim = j.contains("head_dim") && !j["head_dim"].is_null();
  KVC_CHECK(explicit_head_dim || c.hidden_size % c.num_heads == 0,
            "{}: hidden_size ({}) is not a multiple of num_attention_heads ({}) and no head_dim is given", src,
            c.hidden_size, c.num_heads);
  c.head_dim = explicit_head_dim ? required_positive(j, "head_dim", src) : c.hidden_size / c.num_heads;
  KVC_CHECK(c.num_heads % c.num_kv_heads == 0,
            "{}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", src, c.num_heads,
            c.num_kv_heads);
  KVC_CHECK(c.head_dim % 2 == 0, "{}: head_dim ({}) must be even for RoPE", src, c.head_dim);
  // eps guards a division by the RMS of activations; 1 or more would dominate it in every real model.
  c.rms_norm_eps = number_in(j, "rms_norm_eps", 1e-6, 0.0, 1.0, src);
  c.rope_theta = number_in(j, "rope_theta", 10000.0, 1.0, kMaxRopeTheta, src);
  if (const json* parameters = flat_rope_parameters(j); parameters != nullptr && parameters->contains("rope_theta")) {
    c.rope_theta = number_in(*parameters, "rope_theta", 10000.0, 1.0, kMaxRopeTheta, src + " rope_parameters");
  }
  c.rope_scaling = parse_rope_scaling(j, src);
  c.tie_word_embeddings = bool_or(j, "tie_word_embeddings", false, src);
  c.qkv_bias = c.traits.always_qkv_bias || bool_or(j, "attention_bias", false, src);
  KVC_CHECK(!bool_or(j, "mlp_bias", false, src), "{}: mlp_bias=true is not supported", src);
  activation(j, src);
  const bool window_on =
      c.traits.honours_sliding_window || (c.traits.sliding_window_flag && bool_or(j, "use_sliding_window", false, src));
  if (window_on && j.contains("sliding_window") && j["sliding_window"].is_number_integer()) {
    c.sliding_window = j["sliding_window"].get<int64_t>();
  }
  // Read wide and range-checked: get<int>() would wrap 2^40 to 0, a real token.
  const auto token_id = [&](const json& v, const char* field) {
    const int64_t id = v.get<int64_t>();
    KVC_CHECK(id >= 0 && id < std::max<int64_t>(c.vocab_size, 1), "{}: {} is {}, outside the vocabulary (0 to {})", src,
              field, id, c.vocab_size - 1);
    return static_cast<int>(id);
  };
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
    c.bos_token_id = token_id(j["bos_token_id"], "bos_token_id");
  if (j.contains("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids = {token_id(e, "eos_token_id")};
    if (e.is_array()) {
      c.eos_token_ids.clear();
      for (const auto& id : e) {
        KVC_CHECK(id.is_number_integer(), "{}: eos_token_id must hold integers", src);
        c.eos_token_ids.push_back(token_id(id, "eos_token_id"));
      }
    }
  }
  if (j.contains("torch_dtype") && j["torch_dtype"].is_string()) c.torch_dtype = j["torch_dtype"].get<std::string>();
  if (c.traits.local_global_layers) read_gemma3_fields(j, c, src);
  return c;
}

}  // namespace kvc
