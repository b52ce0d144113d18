// Defaults of the LayerCache capabilities: a layout that lacks one says so in one line.
#include "cache/layer_cache.h"

#include "util/error.h"

namespace kvc {

std::unique_ptr<LayerCache> LayerCache::retain_per_head(const std::vector<at::Tensor>&) {
  fail("the {} cache cannot keep a different number of entries per KV head", layout());
}

at::Tensor LayerCache::evict_one(const at::Tensor& slots) {
  const int64_t kv = slots.size(0), n = lengths().max().item<int64_t>();
  const at::Tensor all = at::arange(n, slots.options().dtype(at::kLong)).unsqueeze(0).expand({kv, n});
  const at::Tensor kept = all.masked_select(all != slots.to(at::kLong).unsqueeze(1)).view({kv, n - 1});
  retain(kept);
  return kept;
}

LayerCache::Rows LayerCache::merge_rows() { fail("the {} cache has no per-head rows to merge entries into", layout()); }

std::unique_ptr<LayerCache> LayerCache::clone() const { fail("the {} cache cannot be copied", layout()); }

at::Tensor LayerCache::entry_positions(int64_t) const {
  fail("the {} cache does not expose positions per KV head (--dump-kept needs them)", layout());
}

}  // namespace kvc
