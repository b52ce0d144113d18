#include "cache/kept_record.h"

#include "cache/kv_cache.h"

namespace kvc {
namespace {

constexpr const char* kPositionsPurpose = "expose positions per KV head (--dump-kept needs them)";

}  // namespace

void KeptRecord::reset(int64_t layers, int64_t kv_heads) {
  num_layers = layers;
  num_kv_heads = kv_heads;
  after_prefill.assign(static_cast<size_t>(layers), {});
  merged.assign(static_cast<size_t>(layers),
                std::vector<std::vector<std::pair<int64_t, int64_t>>>(static_cast<size_t>(kv_heads)));
}

void KeptRecord::add_merges(int64_t layer, const at::Tensor& rows, const LayerCache& cache) {
  const at::Tensor r = rows.to(at::kCPU);
  auto& per_head = merged[static_cast<size_t>(layer)];
  const PerHeadLayout& layout = require_per_head_layout(cache, kPositionsPurpose);
  std::vector<at::Tensor> positions;
  for (size_t h = 0; h < per_head.size(); ++h) {
    positions.push_back(layout.entry_positions(static_cast<int64_t>(h)).to(at::kCPU));
  }
  for (int64_t i = 0; i < r.size(0); ++i) {
    const auto h = static_cast<size_t>(r[i][0].item<int64_t>());
    per_head[h].emplace_back(positions[h][r[i][1].item<int64_t>()].item<int64_t>(),
                             positions[h][r[i][2].item<int64_t>()].item<int64_t>());
  }
}

std::vector<std::vector<at::Tensor>> KeptRecord::positions_of(const KVCache& cache) {
  std::vector<std::vector<at::Tensor>> out;
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    std::vector<at::Tensor> heads;
    const LayerCache& layer = cache.layer(l);
    const PerHeadLayout& layout = require_per_head_layout(layer, kPositionsPurpose);
    const int64_t kv_heads = layer.lengths().numel();
    for (int64_t h = 0; h < kv_heads; ++h) heads.push_back(std::get<0>(layout.entry_positions(h).to(at::kCPU).sort()));
    out.push_back(std::move(heads));
  }
  return out;
}

}  // namespace kvc
