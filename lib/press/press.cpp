// Press setup: common parameters, --budgets files, the method table behind the registry.
#include "press/press.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include "io/safetensors.h"
#include "model/tensor_bridge.h"
#include "press/press_observer.h"
#include "util/error.h"

namespace kvc {
namespace {

std::map<std::string, ConfigBuilder>& builders() {
  static std::map<std::string, ConfigBuilder> table;
  return table;
}

}  // namespace

std::vector<std::string> common_keys() { return {"agg", "heads"}; }

void parse_common(const PressParams& p, PressConfig& config) {
  const std::string agg = p.get_string("agg", "mean");
  KVC_CHECK(agg == "mean" || agg == "max", "--press {}: agg must be mean or max, got '{}'", p.name, agg);
  config.agg = agg == "max" ? HeadAgg::Max : HeadAgg::Mean;
  const std::string heads = p.get_string("heads", "per");
  KVC_CHECK(heads == "per" || heads == "shared", "--press {}: heads must be per or shared, got '{}'", p.name, heads);
  config.shared_heads = heads == "shared";
  KVC_CHECK(!(config.shared_heads && (config.allocation == Allocation::AdaHeads ||
                                      config.allocation == Allocation::KVComposeUnstructured)),
            "--press {}: heads=shared contradicts per-head budgets; drop heads=shared", p.name);
}

std::vector<double> load_layer_shares(const std::string& path, double ratio, const LlamaModel& model) {
  auto file = st::SafetensorsFile::open(path);
  file->check_all_finite();  // a NaN budget would silently disable or break eviction in every layer
  const auto& meta = file->metadata();
  const auto hash = meta.find("config_hash");
  KVC_CHECK(hash != meta.end(), "--budgets {}: no config_hash in its metadata; not a kvc-profile file", path);
  KVC_CHECK(hash->second == model.config().config_hash,
            "--budgets {}: made for another model (config_hash {} but this model's is {}); rerun kvc-profile on it",
            path, hash->second, model.config().config_hash);
  KVC_CHECK(file->contains("ratios") && file->contains("layer_budget_shares"),
            "--budgets {}: missing 'ratios' or 'layer_budget_shares'; rerun kvc-profile", path);
  const at::Tensor ratios = load_tensor(file, "ratios").to(at::kDouble);
  const at::Tensor shares = load_tensor(file, "layer_budget_shares").to(at::kDouble);  // [R, L]
  KVC_CHECK(shares.dim() == 2 && shares.size(1) == model.config().num_layers,
            "--budgets {}: layer_budget_shares has the wrong shape for a {}-layer model", path,
            model.config().num_layers);
  std::vector<double> available;
  for (int64_t r = 0; r < ratios.numel(); ++r) {
    const double v = ratios[r].item<double>();
    available.push_back(v);
    if (std::abs(v - ratio) < 1e-6) {
      const at::Tensor row = shares[r].contiguous();
      return std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
    }
  }
  fail("--budgets {}: no budgets for --ratio {} (the file has ratios {}); pass one of them or rerun kvc-profile "
       "--ratios",
       path, ratio, fmt::join(available, ", "));
}

CacheSetup make_setup(PressConfig config, const PressParams& p, const LlamaModel& model) {
  parse_common(p, config);
  config.name = p.name;
  config.ratio = p.ratio;
  config.budget = p.budget;
  if (!p.budgets_file.empty()) {
    KVC_CHECK(p.ratio > 0, "--budgets needs --ratio (the file holds per-layer budgets for given ratios)");
    config.layer_shares = load_layer_shares(p.budgets_file, p.ratio, model);
  }
  const ModelConfig& c = model.config();
  ModelShape shape;
  shape.attention = AttentionShape{c.num_heads, c.num_kv_heads, c.head_dim, c.sliding_window};
  shape.num_layers = c.num_layers;
  shape.rope = model.rope();
  shape.options = at::TensorOptions().dtype(model.dtype()).device(model.device());
  auto shared = std::make_shared<const PressConfig>(std::move(config));
  CacheSetup setup;
  setup.name = p.name;
  setup.bounded = shared->bounded && (p.ratio > 0 || p.budget > 0);
  setup.make_observer = [shared, shape]() -> std::unique_ptr<ForwardObserver> {
    return std::make_unique<PressObserver>(shared, shape);
  };
  return setup;
}

void register_method(const std::string& name, const std::string& description, ConfigBuilder build) {
  builders()[name] = build;
  register_press({name, description, [build](const PressParams& p, const LlamaModel& model) {
                    return make_setup(build(p), p, model);
                  }});
}

PressConfig build_method_config(const PressParams& p) {
  const auto it = builders().find(p.name);
  KVC_CHECK(it != builders().end(), "--press: unknown method '{}' (see --list-presses)", p.name);
  return it->second(p);
}

}  // namespace kvc
