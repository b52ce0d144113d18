// ChunkKV (Liu et al. 2025, arXiv:2502.00299; kvpress' ChunkKVPress): the prompt is cut into chunks of
// `size` tokens and whole chunks are kept, so a kept phrase keeps its neighbours. A chunk's score is the base
// scorer's (base=, default snapkv) summed over KV heads and averaged over the chunk's tokens (a shorter last
// chunk over its own); every head keeps the same top chunks, as many as floor(chunks × budget / prompt) (at
// least one) — kvpress' int(chunks × (1 − ratio)) — so a layer keeps whole chunks, up to one chunk fewer
// entries than the budget. Entries the base always keeps (SnapKV's window, sinks) count as the base's highest
// ordinary score plus one, as kvpress' SnapKV pads its window: they weigh in their chunk, they are not kept
// whatever the chunk. Usage: chunkkv:base=snapkv,size=20 (other keys go to the base).
#include <algorithm>
#include <cmath>
#include <vector>

#include "press/press.h"

namespace kvc {
namespace {

class ChunkKVAllocator : public Allocator {
 public:
  ChunkKVAllocator(std::unique_ptr<Allocator> base, int64_t size) : base_(std::move(base)), size_(size) {}

  void adjust_probe(AttentionProbe& probe) const override { base_->adjust_probe(probe); }

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer;
    at::Tensor scores = ctx.score(l, &step).to(at::kDouble);
    const int64_t kv = scores.size(0), s = scores.size(1);
    const int64_t chunks = (s + size_ - 1) / size_;
    if (chunks <= 1) {  // kvpress hands a prompt shorter than a chunk to the base press
      ctx.compress(l, scores, ctx.bound(l));
      return;
    }
    const at::Tensor ordinary = scores < kProtected;
    if (ordinary.any().item<bool>() && !ordinary.all().item<bool>()) {
      const double highest = scores.masked_select(ordinary).max().item<double>();
      scores = at::where(ordinary, scores, at::full({}, highest + 1.0, scores.options()));
    }
    const at::Tensor per_token = scores.sum(0);  // [S]
    std::vector<double> chunk_score(static_cast<size_t>(chunks));
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t a = c * size_, len = std::min(size_, s - a);
      chunk_score[static_cast<size_t>(c)] = per_token.narrow(0, a, len).mean().item<double>();
    }
    // The budget's share of the chunks, rounded down (1e-9 absorbs the budget's own rounding of S (1 − r)).
    const double share = static_cast<double>(ctx.bound(l)) / static_cast<double>(s);
    const int64_t kept_chunks =
        std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(chunks) * share + 1e-9)), 1, chunks);
    std::vector<int64_t> order(static_cast<size_t>(chunks));
    for (int64_t c = 0; c < chunks; ++c) order[static_cast<size_t>(c)] = c;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return chunk_score[static_cast<size_t>(a)] > chunk_score[static_cast<size_t>(b)];
    });
    // Importance: 1 inside a kept chunk, 0 elsewhere, the same for every head; the layer keeps exactly those.
    at::Tensor importance = at::zeros({kv, s}, scores.options());
    int64_t keep = 0;
    for (int64_t i = 0; i < kept_chunks; ++i) {
      const int64_t a = order[static_cast<size_t>(i)] * size_, len = std::min(size_, s - a);
      importance.narrow(1, a, len).fill_(1.0);
      keep += len;
    }
    ctx.set_bound(l, keep);
    ctx.compress(l, importance, keep);
  }

 private:
  std::unique_ptr<Allocator> base_;
  int64_t size_;
};

PressConfig build(const PressParams& p) {
  const PressParams base = base_press_params(p, "snapkv", {"size"});
  KVC_CHECK(base.name != "chunk" && base.name != "block", "--press {}: base cannot be {}", p.name, base.name);
  PressConfig c = build_method_config(base);
  KVC_CHECK(!c.new_allocator()->splits_budget() && !c.bounded && !c.new_allocator()->merges(),
            "--press {}: base={} is not a prompt-time scorer with uniform budgets (use snapkv, keydiff, knorm, "
            "expected_attention, ...)",
            p.name, base.name);
  const int64_t size = p.typed().get_int("size", 20);
  KVC_CHECK(size >= 1, "--press {}: size must be >= 1 (tokens per chunk), got {}", p.name, size);
  AllocatorFactory inner = c.allocator;
  c.allocator = [inner, size] {
    return std::make_unique<ChunkKVAllocator>(inner ? inner() : std::make_unique<Allocator>(), size);
  };
  c.shared_heads = true;
  return c;
}

}  // namespace

void register_chunkkv() {
  register_method("chunkkv",
                  "whole chunks of the prompt, ranked by the base scores summed over heads and averaged over the "
                  "chunk; every head keeps the same chunks (ChunkKV, arXiv:2502.00299; base=snapkv,size=20)",
                  build);
}

}  // namespace kvc
