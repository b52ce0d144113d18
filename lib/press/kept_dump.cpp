#include "press/kept_dump.h"

#include "cache/kv_cache.h"
#include "io/safetensors.h"
#include "model/forward_observer.h"
#include "model/tensor_bridge.h"
#include "util/error.h"

namespace kvc {

void KeptRecord::reset(int64_t layers, int64_t kv_heads) {
  num_layers = layers;
  num_kv_heads = kv_heads;
  after_prefill.assign(static_cast<size_t>(layers), {});
  merged.assign(static_cast<size_t>(layers), std::vector<std::vector<std::pair<int64_t, int64_t>>>(
                                                 static_cast<size_t>(kv_heads)));
}

void KeptRecord::add_merges(int64_t layer, const at::Tensor& rows, const LayerCache& cache) {
  const at::Tensor r = rows.to(at::kCPU);
  auto& per_head = merged[static_cast<size_t>(layer)];
  std::vector<at::Tensor> positions;
  for (size_t h = 0; h < per_head.size(); ++h) {
    positions.push_back(cache.entry_positions(static_cast<int64_t>(h)).to(at::kCPU));
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
    const int64_t kv_heads = layer.lengths().numel();
    for (int64_t h = 0; h < kv_heads; ++h) heads.push_back(std::get<0>(layer.entry_positions(h).to(at::kCPU).sort()));
    out.push_back(std::move(heads));
  }
  return out;
}

void write_kept_dump(const std::string& path, const KeptRecord& record, const KVCache& cache,
                     const std::map<std::string, std::string>& metadata) {
  KVC_CHECK(!record.after_prefill.empty(), "--dump-kept {}: no prompt was compressed (no --press?)", path);
  st::SafetensorsWriter writer;
  const auto name = [](const char* kind, size_t l, size_t h) { return std::string(kind) + "." + std::to_string(l) + "." + std::to_string(h); };
  const auto final_positions = KeptRecord::positions_of(cache);
  for (size_t l = 0; l < record.after_prefill.size(); ++l) {
    for (size_t h = 0; h < record.after_prefill[l].size(); ++h) {
      add_tensor(writer, name("kept", l, h), record.after_prefill[l][h].to(at::kInt));
      add_tensor(writer, name("final", l, h), final_positions[l][h].to(at::kInt));
      const auto& pairs = record.merged[l][h];
      if (pairs.empty()) continue;
      at::Tensor m = at::empty({static_cast<int64_t>(pairs.size()), 2}, at::kInt);
      for (size_t i = 0; i < pairs.size(); ++i) {
        m[static_cast<int64_t>(i)][0] = pairs[i].first;
        m[static_cast<int64_t>(i)][1] = pairs[i].second;
      }
      add_tensor(writer, name("merged", l, h), m);
    }
  }
  writer.set_metadata("format", "kvc-kept-v1");
  writer.set_metadata("prompt_tokens", std::to_string(record.prompt_tokens));
  writer.set_metadata("num_layers", std::to_string(record.num_layers));
  writer.set_metadata("num_kv_heads", std::to_string(record.num_kv_heads));
  for (const auto& [k, v] : metadata) writer.set_metadata(k, v);
  writer.write(path);
}

namespace {

KeptRecorder& recorder_of(const std::string& path, ForwardObserver* observer) {
  KeptRecorder* recorder = observer != nullptr ? observer->kept_recorder() : nullptr;
  KVC_CHECK(recorder != nullptr, "--dump-kept {}: needs a token-eviction method (--press)", path);
  return *recorder;
}

}  // namespace

void start_kept_dump(const std::string& path, ForwardObserver* observer) {
  if (path.empty()) return;
  recorder_of(path, observer).record_kept();
}

void finish_kept_dump(const std::string& path, ForwardObserver* observer, const KVCache& cache,
                      const std::map<std::string, std::string>& metadata) {
  if (path.empty()) return;
  write_kept_dump(path, recorder_of(path, observer).kept_record(), cache, metadata);
}

}  // namespace kvc
