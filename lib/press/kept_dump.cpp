#include "press/kept_dump.h"

#include "cache/kv_cache.h"
#include "io/safetensors.h"
#include "model/forward_observer.h"
#include "model/tensor_bridge.h"
#include "press/channel_pruned_cache.h"
#include "util/error.h"

namespace kvc {

void write_kept_dump(const std::string& path, const KeptRecord& record, const KVCache& cache,
                     const std::map<std::string, std::string>& metadata) {
  KVC_CHECK(!record.after_prefill.empty(), "--dump-kept {}: no prompt was compressed (no --press?)", path);
  st::SafetensorsWriter writer;
  const auto name = [](const char* kind, size_t l, size_t h) {
    return std::string(kind) + "." + std::to_string(l) + "." + std::to_string(h);
  };
  const auto final_positions = KeptRecord::positions_of(cache);
  for (size_t l = 0; l < record.after_prefill.size(); ++l) {
    // A layer that stores some key channels only (ThinK) names them.
    const auto* pruned = dynamic_cast<const ChannelPrunedLayerCache*>(&cache.layer(static_cast<int64_t>(l)));
    for (size_t h = 0; h < record.after_prefill[l].size(); ++h) {
      add_tensor(writer, name("kept", l, h), record.after_prefill[l][h].to(at::kInt));
      add_tensor(writer, name("final", l, h), final_positions[l][h].to(at::kInt));
      if (pruned != nullptr)
        add_tensor(writer, name("channels", l, h), pruned->channels()[static_cast<int64_t>(h)].to(at::kCPU, at::kInt));
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
