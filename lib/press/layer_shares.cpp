// --budgets FILE: per-layer shares of the budget measured by kvc-profile, as an allocator around the
// method's own.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "io/safetensors.h"
#include "model/tensor_bridge.h"
#include "press/press.h"
#include "util/error.h"

namespace kvc {
namespace {

class LayerShareAllocator : public Allocator {
 public:
  LayerShareAllocator(std::vector<double> shares, std::unique_ptr<Allocator> inner)
      : shares_(std::move(shares)), inner_(std::move(inner)) {}

  void adjust_probe(AttentionProbe& probe) const override { inner_->adjust_probe(probe); }
  std::vector<int64_t> layer_bounds(const PressContext& ctx) override {
    const auto L = static_cast<size_t>(ctx.shape().num_layers);
    const std::vector<int64_t> lo(L, 1), hi(L, ctx.prompt_length());
    return distribute(shares_, ctx.budget() * ctx.shape().num_layers, lo, hi);
  }
  void before_evict(int64_t layer, LayerCache& cache, const at::Tensor& kept, KeptRecord* record) override {
    inner_->before_evict(layer, cache, kept, record);
  }
  bool splits_budget() const override { return true; }
  bool merges() const override { return inner_->merges(); }

 private:
  std::vector<double> shares_;
  std::unique_ptr<Allocator> inner_;
};

}  // namespace

AllocatorFactory layer_share_allocator(std::vector<double> shares, AllocatorFactory inner) {
  return [shares = std::move(shares), inner = std::move(inner)] {
    return std::make_unique<LayerShareAllocator>(shares, inner());
  };
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
  fail(
      "--budgets {}: no budgets for --ratio {} (the file has ratios {}); pass one of them or rerun kvc-profile "
      "--ratios",
      path, ratio, fmt::join(available, ", "));
}

}  // namespace kvc
