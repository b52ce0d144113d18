// Press setup: common parameters, the method table behind the registry.
#include "press/press.h"

#include <map>

#include "press/press_observer.h"
#include "util/error.h"

namespace kvc {
namespace {

std::map<std::string, ConfigBuilder>& builders() {
  static std::map<std::string, ConfigBuilder> table;
  return table;
}

}  // namespace

void parse_common(const PressParams& p, PressConfig& config) {
  const std::string agg = p.get_string("agg", "mean");
  KVC_CHECK(agg == "mean" || agg == "max", "--press {}: agg must be mean or max, got '{}'", p.name, agg);
  config.agg = agg == "max" ? HeadAgg::Max : HeadAgg::Mean;
  const std::string heads = p.get_string("heads", "per");
  KVC_CHECK(heads == "per" || heads == "shared", "--press {}: heads must be per or shared, got '{}'", p.name, heads);
  config.shared_heads = heads == "shared";
  KVC_CHECK(!(config.shared_heads && config.new_allocator()->per_head_budgets()),
            "--press {}: heads=shared contradicts per-head budgets; drop heads=shared", p.name);
}

CacheSetup make_setup(PressConfig config, const PressParams& p, const LlamaModel& model) {
  parse_common(p, config);
  if (config.bind_model) config.bind_model(config, model);
  config.name = p.name;
  config.ratio = p.ratio;
  config.budget = p.budget;
  const ModelConfig& c = model.config();
  ModelShape shape;
  shape.attention = c.attention_shape();
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (!c.is_local_layer(l)) shape.layers.push_back(l);
  shape.num_layers = static_cast<int64_t>(shape.layers.size());
  shape.model_layers = c.num_layers;
  shape.context = c.max_position_embeddings;
  if (!p.budgets_file.empty()) {
    KVC_CHECK(p.ratio > 0, "--budgets needs --ratio (the file holds per-layer budgets for given ratios)");
    AllocatorFactory inner = config.allocator;
    if (!inner) inner = [] { return std::make_unique<Allocator>(); };
    const std::vector<double> every_layer = load_layer_shares(p.budgets_file, p.ratio, model);
    std::vector<double> compressed;  // the shares of the layers the press acts on
    for (int64_t l : shape.layers) compressed.push_back(every_layer[static_cast<size_t>(l)]);
    config.allocator = layer_share_allocator(std::move(compressed), inner);
  }
  auto shared = std::make_shared<const PressConfig>(std::move(config));
  CacheSetup setup;
  setup.name = p.name;
  setup.bounded = shared->bounded && (p.ratio > 0 || p.budget > 0);
  const auto allocator = shared->new_allocator();
  setup.needs.per_head_lengths = allocator->per_head_budgets();
  setup.needs.merge = allocator->merges();
  setup.needs.read_rows = shared->decoding.interval > 0;
  setup.make_observer = [shared, shape]() -> std::unique_ptr<ForwardObserver> {
    return std::make_unique<PressObserver>(shared, shape);
  };
  return setup;
}

void register_method(const std::string& name, const std::string& description, ConfigBuilder build, bool sizes_itself,
                     bool needs_file, const std::string& sizing_key) {
  builders()[name] = build;
  register_press({name, description,
                  [build](const PressParams& p, const LlamaModel& model) { return make_setup(build(p), p, model); },
                  sizes_itself, sizing_key, needs_file});
}

PressConfig build_method_config(const PressParams& p) {
  registered_presses();  // the built-in methods register their builders on the first lookup
  const auto it = builders().find(p.name);
  if (it == builders().end()) fail_unknown_press(p.name);
  return it->second(p);
}

PressParams base_press_params(const PressParams& wrapper, const std::string& fallback,
                              std::initializer_list<const char*> own_keys) {
  PressParams base = wrapper;
  base.name = wrapper.get_string("base", fallback);
  base.values.erase("base");
  for (const char* key : own_keys) base.values.erase(key);
  KVC_CHECK(base.name != wrapper.name, "--press {}: base cannot be {}", wrapper.name, base.name);
  return base;
}

}  // namespace kvc
