#include "support/naive_llama.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "io/safetensors.h"

namespace kvc::test {
namespace {

using Vec = std::vector<double>;

struct Weights {
  std::shared_ptr<st::SafetensorsFile> file;
  bool has(const std::string& name) const { return file->contains(name); }
  Vec get(const std::string& name) const {
    const auto& info = file->info(name);
    const uint8_t* p = file->data(name);
    Vec out(static_cast<size_t>(info.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);  // tests write float32 checkpoints
      out[i] = f;
    }
    return out;
  }
};

Vec matvec(const Vec& w, const Vec& x, size_t rows) {  // w: [rows, x.size()]
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += w[r * x.size() + c] * x[c];
  return y;
}

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// inv_freq per the rope_scaling rules, scalar by scalar.
Vec inverse_frequencies(const nlohmann::json& c, size_t head_dim) {
  const double theta = c.value("rope_theta", 10000.0);
  Vec inv(head_dim / 2);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
  if (!c.contains("rope_scaling") || c["rope_scaling"].is_null()) return inv;
  const auto& s = c["rope_scaling"];
  const std::string type = s.value("rope_type", s.value("type", std::string("default")));
  const double factor = s.value("factor", 1.0);
  if (type == "linear") {
    for (double& f : inv) f /= factor;
  } else if (type == "llama3") {
    const double low = s.value("low_freq_factor", 1.0), high = s.value("high_freq_factor", 4.0);
    const double old_len = s.value("original_max_position_embeddings", 8192.0);
    for (double& f : inv) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen < old_len / high) continue;  // high frequency: unchanged
      if (wavelen > old_len / low) {
        f /= factor;
        continue;
      }  // low frequency: scaled
      const double smooth = (old_len / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }
  }
  return inv;
}

void rotate(double* x, size_t d, const Vec& inv, int pos) {
  const size_t half = d / 2;
  for (size_t i = 0; i < half; ++i) {
    const double a = pos * inv[i], c = std::cos(a), s = std::sin(a);
    const double x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

}  // namespace

std::vector<std::vector<double>> naive_llama_logits(const std::string& dir, const std::vector<int>& tokens) {
  std::ifstream in(dir + "/config.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  const size_t H = c["hidden_size"], L = c["num_hidden_layers"], NH = c["num_attention_heads"],
               NKV = c["num_key_value_heads"], D = c["head_dim"], V = c["vocab_size"], I = c["intermediate_size"];
  const double eps = c["rms_norm_eps"];
  const std::string type = c["model_type"];
  const bool windowed = (type == "mistral" || (type == "qwen2" && c.value("use_sliding_window", false))) &&
                        c.contains("sliding_window") && c["sliding_window"].is_number();
  const int window = windowed ? c["sliding_window"].get<int>() : 0;
  const Vec inv = inverse_frequencies(c, D);
  const Weights w{st::SafetensorsFile::open(dir + "/model.safetensors")};
  const Vec embed = w.get("model.embed_tokens.weight");
  const Vec lm_head = w.has("lm_head.weight") ? w.get("lm_head.weight") : embed;

  const size_t T = tokens.size();
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) x[t] = Vec(embed.begin() + tokens[t] * H, embed.begin() + (tokens[t] + 1) * H);
  for (size_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Vec wq = w.get(p + "self_attn.q_proj.weight"), wk = w.get(p + "self_attn.k_proj.weight"),
              wv = w.get(p + "self_attn.v_proj.weight"), wo = w.get(p + "self_attn.o_proj.weight");
    const bool bias = w.has(p + "self_attn.q_proj.bias");
    const Vec bq = bias ? w.get(p + "self_attn.q_proj.bias") : Vec(NH * D, 0.0);
    const Vec bk = bias ? w.get(p + "self_attn.k_proj.bias") : Vec(NKV * D, 0.0);
    const Vec bv = bias ? w.get(p + "self_attn.v_proj.bias") : Vec(NKV * D, 0.0);
    const Vec n1 = w.get(p + "input_layernorm.weight"), n2 = w.get(p + "post_attention_layernorm.weight");
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const Vec h = rms_norm(x[t], n1, eps);
      q[t] = matvec(wq, h, NH * D);
      k[t] = matvec(wk, h, NKV * D);
      v[t] = matvec(wv, h, NKV * D);
      for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[i];
      for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += bk[i], v[t][i] += bv[i];
      for (size_t hd = 0; hd < NH; ++hd) rotate(&q[t][hd * D], D, inv, static_cast<int>(t));
      for (size_t hd = 0; hd < NKV; ++hd) rotate(&k[t][hd * D], D, inv, static_cast<int>(t));
    }
    for (size_t t = 0; t < T; ++t) {
      Vec attn(NH * D, 0.0);
      for (size_t hd = 0; hd < NH; ++hd) {
        const size_t g = hd / (NH / NKV);
        Vec scores;
        std::vector<size_t> keys;
        for (size_t s = 0; s <= t; ++s) {
          if (window > 0 && static_cast<int>(t - s) >= window) continue;
          double dot = 0;
          for (size_t i = 0; i < D; ++i) dot += q[t][hd * D + i] * k[s][g * D + i];
          scores.push_back(dot / std::sqrt(static_cast<double>(D)));
          keys.push_back(s);
        }
        double mx = -1e300, sum = 0;
        for (double sc : scores) mx = std::max(mx, sc);
        for (double& sc : scores) sum += (sc = std::exp(sc - mx));
        for (size_t j = 0; j < keys.size(); ++j)
          for (size_t i = 0; i < D; ++i) attn[hd * D + i] += scores[j] / sum * v[keys[j]][g * D + i];
      }
      const Vec o = matvec(wo, attn, H);
      for (size_t i = 0; i < H; ++i) x[t][i] += o[i];
    }
    const Vec wg = w.get(p + "mlp.gate_proj.weight"), wu = w.get(p + "mlp.up_proj.weight"),
              wd = w.get(p + "mlp.down_proj.weight");
    for (size_t t = 0; t < T; ++t) {
      const Vec h = rms_norm(x[t], n2, eps);
      Vec g = matvec(wg, h, I);
      const Vec u = matvec(wu, h, I);
      for (size_t i = 0; i < I; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const Vec d = matvec(wd, g, H);
      for (size_t i = 0; i < H; ++i) x[t][i] += d[i];
    }
  }
  const Vec final_norm = w.get("model.norm.weight");
  std::vector<Vec> logits(T);
  for (size_t t = 0; t < T; ++t) logits[t] = matvec(lm_head, rms_norm(x[t], final_norm, eps), V);
  return logits;
}

}  // namespace kvc::test
