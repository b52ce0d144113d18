// The LayerCache defaults, and the one-line errors of a layout that lacks a capability.
#include "cache/layer_cache.h"

#include "util/error.h"

namespace kvc {

at::Tensor swap_order(const at::Tensor& slots, int64_t length) {
  const int64_t kv = slots.size(0), last = length - 1;
  const at::Tensor s = slots.to(at::kLong);
  at::Tensor order = at::arange(last, s.options()).unsqueeze(0).repeat({kv, 1});
  if (last == 0) return order;  // the only entry goes
  // Where the slot is the last entry itself, nothing moves: the write lands on a clamped column with
  // the value it already holds.
  const at::Tensor column = s.clamp_max(last - 1).unsqueeze(1);
  order.scatter_(1, column, at::where(s < last, at::full_like(s, last), s.clamp_max(last - 1)).unsqueeze(1));
  return order;
}

void LayerCache::evict_one(const at::Tensor& slots) {
  const int64_t n = lengths().max().item<int64_t>();
  KVC_CHECK(n > 0, "the {} cache has no entry to evict", layout());
  retain(swap_order(slots, n));
}

std::unique_ptr<LayerCache> LayerCache::clone() const { fail("the {} cache cannot be copied", layout()); }

std::unique_ptr<LayerCache> PerHeadLayout::erase_per_head(const std::vector<at::Tensor>& erased) {
  std::vector<at::Tensor> kept;
  for (size_t h = 0; h < erased.size(); ++h) {
    at::Tensor keep = at::ones({entry_positions(static_cast<int64_t>(h)).numel()}, at::kBool);
    keep.index_fill_(0, erased[h].to(at::kLong), false);
    kept.push_back(keep.nonzero().squeeze(1));
  }
  return retain_per_head(kept);
}

PerHeadLayout& require_per_head_layout(LayerCache& cache, const char* purpose) {
  PerHeadLayout* p = cache.per_head_layout();
  KVC_CHECK(p != nullptr, "the {} cache cannot {}", cache.layout(), purpose);
  return *p;
}

const PerHeadLayout& require_per_head_layout(const LayerCache& cache, const char* purpose) {
  const PerHeadLayout* p = cache.per_head_layout();
  KVC_CHECK(p != nullptr, "the {} cache cannot {}", cache.layout(), purpose);
  return *p;
}

MergeableRows& require_mergeable_rows(LayerCache& cache, const char* purpose) {
  MergeableRows* m = cache.mergeable_rows();
  KVC_CHECK(m != nullptr, "the {} cache has no per-head rows to {}", cache.layout(), purpose);
  return *m;
}

}  // namespace kvc
