// BlockPress (kvpress; the block-wise compression of the KeyDiff paper, Park et al. 2025, arXiv:2504.15364):
// the prompt is compressed as if it streamed in blocks of `size` tokens. The cache starts as the first
// `budget` entries; each next block joins what is held, the base scorer (base=, default keydiff) scores that
// union as a prompt of its own, and the top `budget` stay. The base must score from keys, values and queries
// (attention statistics cover the whole prompt, not a union). Each KV head's union is scored on its own, with
// its own queries; kvpress assembles the hidden states of a union from the heads' different tokens, which only
// bases that ignore hidden states (KeyDiff, Knorm) do not see. Usage: block:base=keydiff,size=128.
#include <algorithm>

#include "press/press.h"

namespace kvc {
namespace {

class BlockScorer : public Scorer {
 public:
  BlockScorer(std::shared_ptr<const Scorer> base, int64_t size) : base_(std::move(base)), size_(size) {}
  at::Tensor score(const ScoreInput& in) const override {
    KVC_CHECK(in.step != nullptr && in.step->keys.defined(),
              "--press block: scores the prompt in blocks; it has no prompt step here (layer {})", in.layer);
    const LayerStep& step = *in.step;
    const int64_t kv = step.keys.size(0), s = step.keys.size(1), keep = std::min(in.budget, s);
    const int64_t group = step.queries.size(0) / kv;
    const auto index = step.keys.options().dtype(at::kLong);
    at::Tensor held = at::arange(keep, index).unsqueeze(0).expand({kv, keep}).contiguous();  // [n_kv, keep]
    for (int64_t a = keep; a < s; a += size_) {
      const int64_t n = std::min(size_, s - a);
      const at::Tensor candidates = at::cat({held, at::arange(a, a + n, index).unsqueeze(0).expand({kv, n})}, 1);
      // The union as a step of its own, head by head (each KV head holds its own entries).
      at::Tensor scores = at::empty({kv, keep + n}, step.keys.options().dtype(at::kDouble));
      for (int64_t h = 0; h < kv; ++h) {
        const at::Tensor rows = candidates[h];
        LayerStep part = step;
        part.keys = step.keys.narrow(0, h, 1).index_select(1, rows);
        part.values = step.values.narrow(0, h, 1).index_select(1, rows);
        part.queries = step.queries.narrow(0, h * group, group).index_select(1, rows);
        part.positions = step.positions.index_select(0, rows);
        part.stats = {};
        ScoreInput sub = in;
        sub.step = &part;
        sub.budget = keep;
        sub.num_heads = group;
        sub.num_kv_heads = 1;
        sub.positions = at::Tensor();
        sub.cumulative = at::Tensor();
        sub.current = at::Tensor();
        scores[h] = base_->score(sub).to(at::kDouble)[0];
      }
      // In prompt order, so that a base's sinks and windows are the oldest and newest entries held.
      held = std::get<0>(candidates.gather(1, std::get<1>(scores.topk(keep, 1))).sort(1));
    }
    // What is held at the end scores above the rest: the layer's top `budget` is exactly that.
    return at::full({kv, s}, -1.0, step.keys.options().dtype(at::kDouble)).scatter_(1, held, 1.0);
  }

 private:
  std::shared_ptr<const Scorer> base_;
  int64_t size_;
};

}  // namespace

void register_block() {
  register_method("block",
                  "the prompt compressed block by block as if streamed, the base scorer on what is held plus each "
                  "block (kvpress' BlockPress, KeyDiff's blocks, arXiv:2504.15364; base=keydiff,size=128)",
                  [](const PressParams& p) {
                    const PressParams base = base_press_params(p, "keydiff", {"size"});
                    KVC_CHECK(base.name != "chunk", "--press {}: base cannot be {}", p.name, base.name);
                    PressConfig c = build_method_config(base);
                    KVC_CHECK(!c.new_allocator()->splits_budget() && !c.bounded,
                              "--press {}: base={} is not a prompt-time scorer with uniform budgets (use keydiff, "
                              "knorm, expected_attention, cur, ...)",
                              p.name, base.name);
                    const AttentionProbe probe = c.scorer->probe();
                    KVC_CHECK(!probe.any() && !c.scoring_tokens,
                              "--press {}: base={} scores from attention statistics of the whole prompt, not of the "
                              "held entries and a block; use a scorer of keys, values and queries (keydiff, knorm, "
                              "expected_attention, cur, ...)",
                              p.name, base.name);
                    const int64_t size = p.typed().get_int("size", 128);
                    KVC_CHECK(size >= 1, "--press {}: size must be >= 1 (tokens per block), got {}", p.name, size);
                    c.scorer = std::make_shared<BlockScorer>(c.scorer, size);
                    return c;
                  });
}

}  // namespace kvc
