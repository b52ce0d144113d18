// ChunkPress (kvpress; the chunked selection of FINCH, Corallo & Papotti 2024, TACL): the prompt is cut into
// chunks of `size` tokens, the base scorer (base=, default knorm) scores each chunk as a prompt of its own
// (its keys, values, queries and positions alone, so its sinks and windows are the chunk's), and every chunk
// keeps its own top share of the layer's budget, split over the chunks by their lengths (largest remainder):
// the selection is spread evenly over the context. The base must score from the step's tensors: attention
// statistics cover the whole prompt, not a chunk. Usage: chunk:base=expected_attention,size=512 (other keys go
// to the base).
#include <algorithm>
#include <vector>

#include "press/press.h"

namespace kvc {
namespace {

class ChunkScorer : public Scorer {
 public:
  ChunkScorer(std::shared_ptr<const Scorer> base, int64_t size) : base_(std::move(base)), size_(size) {}
  at::Tensor score(const ScoreInput& in) const override {
    KVC_CHECK(in.step != nullptr && in.step->keys.defined(),
              "--press chunk: scores the prompt's chunks; it has no prompt step here (layer {})", in.layer);
    const LayerStep& step = *in.step;
    const int64_t s = step.keys.size(1), kv = step.keys.size(0);
    const std::vector<int64_t> keep = chunk_budgets(s, size_, in.budget);
    // The kept entries of every chunk score above every dropped one: the layer's top `budget` is their union.
    at::Tensor out = at::full({kv, s}, -1.0, step.keys.options().dtype(at::kDouble));
    for (size_t c = 0; c < keep.size(); ++c) {
      const int64_t a = static_cast<int64_t>(c) * size_, len = std::min(size_, s - a), k = keep[c];
      if (k == 0) continue;
      LayerStep chunk = step;
      chunk.keys = step.keys.narrow(1, a, len);
      chunk.values = step.values.narrow(1, a, len);
      chunk.queries = step.queries.narrow(1, a, len);
      chunk.positions = step.positions.narrow(0, a, len);
      chunk.stats = {};
      ScoreInput sub = in;
      sub.step = &chunk;
      sub.budget = k;
      sub.positions = at::Tensor();
      sub.cumulative = at::Tensor();
      sub.current = at::Tensor();
      const at::Tensor scores = base_->score(sub).to(at::kDouble);
      const at::Tensor top = std::get<1>(scores.topk(k, 1)) + a;
      out.scatter_(1, top, 1.0);
    }
    return out;
  }

 private:
  std::shared_ptr<const Scorer> base_;
  int64_t size_;
};

}  // namespace

void register_chunk() {
  register_method("chunk",
                  "the base scorer on each chunk of the prompt alone, each keeping its share of the budget "
                  "(kvpress' ChunkPress, after FINCH, TACL 2024; base=knorm,size=1024)",
                  [](const PressParams& p) {
                    const PressParams base = base_press_params(p, "knorm", {"size"});
                    PressConfig c = build_method_config(base);
                    KVC_CHECK(!c.new_allocator()->splits_budget() && !c.bounded,
                              "--press {}: base={} is not a prompt-time scorer with uniform budgets (use keydiff, "
                              "knorm, expected_attention, cur, ...)",
                              p.name, base.name);
                    const AttentionProbe probe = c.scorer->probe();
                    KVC_CHECK(!probe.any() && !c.scoring_tokens,
                              "--press {}: base={} scores from attention statistics of the whole prompt, not of a "
                              "chunk; use a scorer of keys, values and queries (keydiff, knorm, expected_attention, "
                              "cur, ...)",
                              p.name, base.name);
                    const int64_t size = p.typed().get_int("size", 1024);
                    KVC_CHECK(size >= 1, "--press {}: size must be >= 1 (tokens per chunk), got {}", p.name, size);
                    c.scorer = std::make_shared<ChunkScorer>(c.scorer, size);
                    return c;
                  });
}

}  // namespace kvc
