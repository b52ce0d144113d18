#include "core/gemma3_config.h"

#include <cmath>

#include "util/error.h"

namespace kvc {

std::vector<bool> gemma3_local_layers(int64_t num_layers, int64_t pattern) {
  std::vector<bool> local(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) local[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
  return local;
}

void read_gemma3_fields(const nlohmann::json& j, ModelConfig& c, const std::string& src) {
  const std::string act = j.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  KVC_CHECK(act == "gelu_pytorch_tanh", "{}: hidden_activation '{}' is not supported (only gelu_pytorch_tanh)", src,
            act);
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    KVC_CHECK(!j.contains(key) || j[key].is_null(), "{}: field '{}' is set; kvc does not soft-cap logits", src, key);
  }
  c.tie_word_embeddings = j.value("tie_word_embeddings", true);
  if (j.contains("query_pre_attn_scalar") && !j["query_pre_attn_scalar"].is_null()) {
    KVC_CHECK(j["query_pre_attn_scalar"].is_number() && j["query_pre_attn_scalar"].get<double>() > 0,
              "{}: field 'query_pre_attn_scalar' must be a positive number", src);
    c.query_pre_attn_scalar = j["query_pre_attn_scalar"].get<double>();
  }
  if (j.contains("rope_local_base_freq") && !j["rope_local_base_freq"].is_null()) {
    KVC_CHECK(j["rope_local_base_freq"].is_number() && j["rope_local_base_freq"].get<double>() > 1,
              "{}: field 'rope_local_base_freq' must be a number above 1", src);
    c.rope_local_theta = j["rope_local_base_freq"].get<double>();
  }
  // transformers 5 writes the RoPE of each layer type under rope_parameters instead.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    const auto theta = [&](const char* layer_type, double fallback) {
      if (!rp.contains(layer_type)) return fallback;
      const auto& r = rp[layer_type];
      KVC_CHECK(r.is_object() && r.value("rope_type", std::string("default")) == "default",
                "{}: rope_parameters.{} must be an object of rope_type default (scaled RoPE is read from "
                "rope_scaling)",
                src, layer_type);
      KVC_CHECK(r.contains("rope_theta") && r["rope_theta"].is_number() && r["rope_theta"].get<double>() > 1,
                "{}: rope_parameters.{}.rope_theta must be a number above 1", src, layer_type);
      return r["rope_theta"].get<double>();
    };
    c.rope_theta = theta("full_attention", c.rope_theta);
    c.rope_local_theta = theta("sliding_attention", c.rope_local_theta);
  }
  KVC_CHECK(
      j.contains("sliding_window") && j["sliding_window"].is_number_integer() && j["sliding_window"].get<int64_t>() > 0,
      "{}: field 'sliding_window' must be a positive integer for Gemma 3", src);
  c.local_window = j["sliding_window"].get<int64_t>();
  c.sliding_window = 0;  // global layers see everything
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const auto& types = j["layer_types"];
    KVC_CHECK(static_cast<int64_t>(types.size()) == c.num_layers, "{}: 'layer_types' has {} entries for {} layers", src,
              types.size(), c.num_layers);
    c.local_layers.clear();
    for (const auto& t : types) {
      KVC_CHECK(t == "sliding_attention" || t == "full_attention",
                "{}: 'layer_types' holds {}, expected sliding_attention or full_attention", src, t.dump());
      c.local_layers.push_back(t == "sliding_attention");
    }
  } else {
    const int64_t pattern = j.value("sliding_window_pattern", int64_t{6});
    KVC_CHECK(pattern > 0, "{}: field 'sliding_window_pattern' must be positive", src);
    c.local_layers = gemma3_local_layers(c.num_layers, pattern);
  }
}

}  // namespace kvc
