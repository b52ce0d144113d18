// LU-KV (Tang et al. 2026, arXiv:2602.08585; kvpress' LUKVPress): each layer × KV head keeps the share of
// its entries a budget curve gives it at the run's compression ratio, the entries chosen by a press's scores
// with the `sink` oldest and `recent` newest protected. The curve is made offline for one model and one
// press by kvc-profile --lukv-press (lukv_profile.h), which writes it with the press it ranks by and its
// protection, so `lukv:curve=FILE` runs exactly what was profiled. kvpress downloads the authors' curves
// for Llama-3.1-8B; kvc makes its own for the model at hand.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "io/safetensors.h"
#include "model/tensor_bridge.h"
#include "press/lukv_allocation.h"
#include "press/press.h"
#include "util/checked_number.h"

namespace kvc {
namespace {

struct LukvCurve {
  std::string path;
  at::Tensor prune;  // [99, L, KV] float32
  std::string press, config_hash;
  int64_t sink = 4, recent = 1;
};

std::string meta_or(const std::map<std::string, std::string>& meta, const std::string& key,
                    const std::string& fallback) {
  const auto it = meta.find(key);
  return it == meta.end() ? fallback : it->second;
}

int64_t meta_count(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key,
                   int64_t fallback) {
  const std::string text = meta_or(meta, key, std::to_string(fallback));
  const std::optional<int64_t> value = parse_integer(text);
  KVC_CHECK(value && *value >= 0, "--press lukv: {}: metadata {}='{}' is not a count", path, key, text);
  return *value;
}

std::shared_ptr<const LukvCurve> load_curve(const std::string& path) {
  auto file = st::SafetensorsFile::open(path);
  auto curve = std::make_shared<LukvCurve>();
  curve->path = path;
  KVC_CHECK(file->contains("lukv_prune"),
            "--press lukv: {} holds no 'lukv_prune' budget curve; make one with kvc-profile --lukv-press", path);
  file->check_all_finite();
  curve->prune = load_tensor(file, "lukv_prune").to(at::kFloat);
  KVC_CHECK(curve->prune.dim() == 3 && curve->prune.size(0) == 99,
            "--press lukv: {}: lukv_prune must be [99, layers, KV heads], got {}", path,
            fmt::join(curve->prune.sizes(), " x "));
  KVC_CHECK((curve->prune >= 0).all().item<bool>() && (curve->prune <= 1).all().item<bool>(),
            "--press lukv: {}: lukv_prune holds shares outside [0, 1]", path);
  const auto& meta = file->metadata();
  curve->press = meta_or(meta, "lukv_press", "");
  KVC_CHECK(!curve->press.empty(), "--press lukv: {}: no lukv_press in its metadata (the press the curve ranks by)",
            path);
  curve->sink = meta_count(path, meta, "lukv_sink", 4);
  curve->recent = meta_count(path, meta, "lukv_recent", 1);
  curve->config_hash = meta_or(meta, "config_hash", "");
  return curve;
}

class LukvAllocator : public Allocator {
 public:
  explicit LukvAllocator(std::shared_ptr<const LukvCurve> curve) : curve_(std::move(curve)) {}

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer, S = ctx.prompt_length();
    const at::Tensor importance = protect_ends(ctx.score(l, &step), curve_->sink, curve_->recent);
    // The curve's row for the run's ratio, as kvpress indexes it: round(100 r) − 1 within [0, 98].
    const double ratio = 1.0 - ctx.target_entries() / static_cast<double>(S);
    const int64_t row = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(ratio * 100)) - 1, 0, 98);
    ctx.compress_per_head(l, importance, lukv_head_keep(curve_->prune[row][l], S));
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  std::shared_ptr<const LukvCurve> curve_;
};

PressConfig build(const PressParams& p) {
  p.check_known_keys({"curve"});
  const std::string path = p.get_string("curve", "");
  KVC_CHECK(!path.empty(),
            "--press lukv: needs curve=FILE, a budget curve for this model and press (kvc-profile -m MODEL -f TEXT "
            "--lukv-press expected_attention --out-dir DIR writes DIR/lukv.safetensors)");
  const std::shared_ptr<const LukvCurve> curve = load_curve(path);
  PressParams base = PressParams::parse(curve->press);
  base.ratio = p.ratio;
  base.budget = p.budget;
  PressConfig c = build_method_config(base);
  const auto inner = c.new_allocator();
  KVC_CHECK(!inner->splits_budget() && !c.bounded && !inner->merges() && !c.sizes_itself,
            "--press lukv: {}: its press {} is not a prompt-time scorer with uniform budgets", path, curve->press);
  PressConfig probe_config;
  parse_common(base, probe_config);  // the scorer's own head aggregation (agg=), which make_setup would reset
  const HeadAgg agg = probe_config.agg;
  c.allocator = [curve] { return std::make_unique<LukvAllocator>(curve); };
  const std::string name = p.name;
  c.bind_model = [curve, agg, name, bind = c.bind_model](PressConfig& config, const LlamaModel& model) {
    if (bind) bind(config, model);
    config.agg = agg;
    const ModelConfig& mc = model.config();
    KVC_CHECK(curve->config_hash.empty() || curve->config_hash == mc.config_hash,
              "--press {}: {} was made for another model (config_hash {} but this model's is {}); run kvc-profile "
              "--lukv-press on this one",
              name, curve->path, curve->config_hash, mc.config_hash);
    int64_t layers = 0;
    for (int64_t l = 0; l < mc.num_layers; ++l) layers += mc.is_local_layer(l) ? 0 : 1;
    KVC_CHECK(curve->prune.size(1) == layers && curve->prune.size(2) == mc.num_kv_heads,
              "--press {}: {} is a curve for {} layers x {} KV heads; this model's press acts on {} x {}", name,
              curve->path, curve->prune.size(1), curve->prune.size(2), layers, mc.num_kv_heads);
  };
  c.bounded = false;  // heads keep different numbers of entries after the prompt
  return c;
}

}  // namespace

void register_lukv() {
  register_method("lukv",
                  "per-head budgets from an offline budget curve around the press it was profiled with (LU-KV, "
                  "arXiv:2602.08585; curve= from kvc-profile --lukv-press)",
                  build, /*sizes_itself=*/false, /*needs_file=*/true);
}

}  // namespace kvc
