#include "lowrank/lowrank_artifacts.h"

#include <algorithm>

#include <fmt/format.h>

#include "io/safetensors.h"
#include "model/tensor_bridge.h"
#include "util/checked_number.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::lowrank {
namespace {

std::string tensor_name(int64_t layer, const char* which, const char* what) {
  return fmt::format("layers.{}.{}.{}", layer, which, what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

at::Tensor read_checked(const std::shared_ptr<st::SafetensorsFile>& file, const std::string& name,
                        const std::vector<int64_t>& shape, at::ScalarType dtype) {
  KVC_CHECK(file->contains(name), "{}: missing tensor '{}' (not a complete low-rank artifact)", file->path(), name);
  const auto& info = file->info(name);
  KVC_CHECK(info.shape == shape, "{}: tensor '{}' has shape {}, but this model needs {} (artifact for another model?)",
            file->path(), name, shape_text(info.shape), shape_text(shape));
  return load_tensor(file, name).to(dtype).contiguous();
}

Projection read_projection(const std::shared_ptr<st::SafetensorsFile>& file, int64_t layer, const char* which,
                           int64_t d, bool gates) {
  Projection p;
  p.U = read_checked(file, tensor_name(layer, which, "U"), {d, d}, at::kFloat);
  if (gates) {
    p.W = read_checked(file, tensor_name(layer, which, "W"), {d, d}, at::kFloat);
    p.b = read_checked(file, tensor_name(layer, which, "b"), {d}, at::kFloat);
  } else {
    p.eigenvalues = read_checked(file, tensor_name(layer, which, "eigenvalues"), {d}, at::kDouble);
    // A covariance's eigenvalues, largest first: rank choices read them as sorted variances. Rounding
    // leaves the smallest a hair below zero, hence the tolerance relative to the largest.
    const at::Tensor e = p.eigenvalues;
    const double tolerance = 1e-9 * std::max(1.0, e.abs().max().item<double>());
    KVC_CHECK(e.min().item<double>() >= -tolerance,
              "{}: layer {} {}: an eigenvalue is negative ({}); the bases are "
              "damaged: run kvc-calibrate again",
              file->path(), layer, which, e.min().item<double>());
    if (d > 1) {
      KVC_CHECK((e.slice(0, 1) - e.slice(0, 0, d - 1)).max().item<double>() <= tolerance,
                "{}: layer {} {}: the eigenvalues are not sorted largest first; the bases are damaged: run "
                "kvc-calibrate again",
                file->path(), layer, which);
    }
  }
  return p;
}

}  // namespace

Artifact load_artifact(const std::string& path, const ModelConfig& config, const std::string& flag) {
  KVC_CHECK(path == "-" || file_exists(path), "{}: file not found: '{}'", flag, path);
  // Messages name the file, or for "-" the flag that read standard input.
  const std::string shown = path == "-" ? flag + " - (standard input)" : path;
  std::shared_ptr<st::SafetensorsFile> file;
  try {
    file = st::SafetensorsFile::open(path);
  } catch (const Error& e) {
    fail("{}: {}", flag, e.what());  // which of the tool's files is damaged
  }
  const auto& meta = file->metadata();
  const auto get = [&](const std::string& key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  Artifact a;
  a.path = path;
  a.kind = get("kind");
  a.metadata = meta;
  KVC_CHECK(a.kind == kBasesKind || a.kind == kGatesKind,
            "{}: not a low-rank artifact (expected bases from kvc-calibrate or gates from kvc-train)", shown);
  KVC_CHECK(get("model_config_hash") == config.config_hash,
            "{}: made for another model (config hash {} != {}); run kvc-calibrate/kvc-train for this model", shown,
            get("model_config_hash"), config.config_hash);
  const int64_t d = config.kv_dim();
  KVC_CHECK(get("num_layers") == std::to_string(config.num_layers) && get("kv_dim") == std::to_string(d),
            "{}: shapes do not match the model ({} layers, d_kv {} in the file; the model has {} and {})", shown,
            get("num_layers"), get("kv_dim"), config.num_layers, d);
  if (a.is_gates()) {
    // The whole text must be the number: "0.5x" is damage, not 0.5.
    const auto tau = parse_finite_number(get("tau"));
    KVC_CHECK(tau.has_value(), "{}: metadata 'tau' is '{}', not a number", shown, get("tau"));
    a.tau = *tau;
    KVC_CHECK(a.tau > 0 && a.tau < 1, "{}: metadata 'tau' is {}, outside (0, 1)", shown, get("tau"));
  }
  // Bases, gates and eigenvalues alike: one NaN would turn every compressed run's output into NaN.
  file->check_all_finite();
  const bool rotated = file->contains(tensor_name(0, "k_rotated", "U"));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    a.layers.push_back({read_projection(file, l, "k", d, a.is_gates()), read_projection(file, l, "v", d, a.is_gates()),
                        rotated ? read_projection(file, l, "k_rotated", d, false) : Projection{}});
  }
  return a;
}

void write_artifact(const std::string& path, const Artifact& artifact, const ModelConfig& config) {
  st::SafetensorsWriter w;
  for (const auto& [k, v] : artifact.metadata) w.set_metadata(k, v);
  w.set_metadata("kind", artifact.kind);
  w.set_metadata("model_config_hash", config.config_hash);
  w.set_metadata("num_layers", std::to_string(config.num_layers));
  w.set_metadata("kv_dim", std::to_string(config.kv_dim()));
  if (artifact.is_gates()) w.set_metadata("tau", fmt::format("{}", artifact.tau));
  for (size_t l = 0; l < artifact.layers.size(); ++l) {
    const auto li = static_cast<int64_t>(l);
    for (const auto& [which, p] :
         {std::pair<const char*, const Projection&>{"k", artifact.layers[l].key},
          std::pair<const char*, const Projection&>{"v", artifact.layers[l].value},
          std::pair<const char*, const Projection&>{"k_rotated", artifact.layers[l].rotated_key}}) {
      if (!p.U.defined()) continue;
      add_tensor(w, tensor_name(li, which, "U"), p.U.detach().to(at::kFloat));
      if (p.has_gate()) {
        add_tensor(w, tensor_name(li, which, "W"), p.W.detach().to(at::kFloat));
        add_tensor(w, tensor_name(li, which, "b"), p.b.detach().to(at::kFloat));
      }
      if (p.eigenvalues.defined()) add_tensor(w, tensor_name(li, which, "eigenvalues"), p.eigenvalues.to(at::kDouble));
    }
  }
  w.write(path);
}

}  // namespace kvc::lowrank
