#include "model/model_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"

namespace kvc {
namespace {

using nlohmann::json;

int64_t required_positive(const json& j, const char* key, const std::string& src) {
  KVC_CHECK(j.contains(key), "{}: missing required field '{}'", src, key);
  KVC_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() > 0, "{}: field '{}' must be a positive integer",
            src, key);
  return j[key].get<int64_t>();
}

double number_or(const json& j, const char* key, double fallback, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  KVC_CHECK(j[key].is_number(), "{}: field '{}' must be a number", src, key);
  return j[key].get<double>();
}

bool bool_or(const json& j, const char* key, bool fallback, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  KVC_CHECK(j[key].is_boolean(), "{}: field '{}' must be true or false", src, key);
  return j[key].get<bool>();
}

RopeScaling parse_rope_scaling(const json& j, const std::string& src) {
  RopeScaling s;
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return s;
  const json& r = j["rope_scaling"];
  KVC_CHECK(r.is_object(), "{}: 'rope_scaling' must be an object or null", src);
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  KVC_CHECK(r.contains(type_key) && r[type_key].is_string(), "{}: 'rope_scaling' lacks 'rope_type'", src);
  s.type = r[type_key].get<std::string>();
  KVC_CHECK(s.type == "default" || s.type == "linear" || s.type == "llama3",
            "{}: unsupported rope_scaling type '{}' (supported: default, linear, llama3)", src, s.type);
  s.factor = number_or(r, "factor", 1.0, src);
  KVC_CHECK(s.factor > 0, "{}: rope_scaling.factor must be positive", src);
  s.low_freq_factor = number_or(r, "low_freq_factor", 1.0, src);
  s.high_freq_factor = number_or(r, "high_freq_factor", 4.0, src);
  s.original_max_position_embeddings =
      static_cast<int64_t>(number_or(r, "original_max_position_embeddings", 8192, src));
  if (s.type == "llama3") {
    KVC_CHECK(s.high_freq_factor > s.low_freq_factor, "{}: rope_scaling needs high_freq_factor > low_freq_factor",
              src);
  }
  return s;
}

}  // namespace

bool ModelConfig::is_eos(int id) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), id) != eos_token_ids.end();
}

ModelConfig ModelConfig::from_file(const std::string& config_path) {
  const std::string text = read_text_file(config_path);
  ModelConfig c = from_json_text(text, config_path);
  c.config_hash = hash_string(text);
  return c;
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({})", src, e.what());
  }
  KVC_CHECK(j.is_object(), "{}: expected a JSON object", src);
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
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? required_positive(j, "head_dim", src)
                                                                   : c.hidden_size / c.num_heads;
  KVC_CHECK(c.num_heads % c.num_kv_heads == 0, "{}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
            src, c.num_heads, c.num_kv_heads);
  KVC_CHECK(c.head_dim % 2 == 0, "{}: head_dim ({}) must be even for RoPE", src, c.head_dim);
  c.rms_norm_eps = number_or(j, "rms_norm_eps", 1e-6, src);
  c.rope_theta = number_or(j, "rope_theta", 10000.0, src);
  KVC_CHECK(c.rope_theta > 0, "{}: rope_theta must be positive", src);
  c.rope_scaling = parse_rope_scaling(j, src);
  c.tie_word_embeddings = bool_or(j, "tie_word_embeddings", false, src);
  c.qkv_bias = c.traits.always_qkv_bias || bool_or(j, "attention_bias", false, src);
  KVC_CHECK(!bool_or(j, "mlp_bias", false, src), "{}: mlp_bias=true is not supported", src);
  const std::string act = j.contains("hidden_act") && j["hidden_act"].is_string() ? j["hidden_act"].get<std::string>() : "silu";
  KVC_CHECK(act == "silu", "{}: hidden_act '{}' is not supported (only silu)", src, act);
  const bool window_on = c.traits.honours_sliding_window ||
                         (c.traits.sliding_window_flag && bool_or(j, "use_sliding_window", false, src));
  if (window_on && j.contains("sliding_window") && j["sliding_window"].is_number_integer()) {
    c.sliding_window = j["sliding_window"].get<int64_t>();
  }
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_token_id = j["bos_token_id"].get<int>();
  if (j.contains("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids = {e.get<int>()};
    if (e.is_array()) {
      c.eos_token_ids.clear();
      for (const auto& id : e) {
        KVC_CHECK(id.is_number_integer(), "{}: eos_token_id must hold integers", src);
        c.eos_token_ids.push_back(id.get<int>());
      }
    }
  }
  if (j.contains("torch_dtype") && j["torch_dtype"].is_string()) c.torch_dtype = j["torch_dtype"].get<std::string>();
  return c;
}

}  // namespace kvc
