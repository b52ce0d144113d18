// FINCH (Corallo & Papotti 2024, TACL; kvpress' FinchPress): the prompt is a context followed by a question of
// `window` tokens, and the question's attention on the context decides what stays. As SnapKV without pooling,
// except that each question token's attention row is weighted by its position (kvpress' normalize_scores: a
// later query spreads the same mass over more keys); the question itself is always kept. With chunk=N the
// context is selected chunk by chunk, each chunk keeping its share of the budget (by length), so the kept
// entries spread over the whole context. kvpress finds the question by a delimiter token it adds to the
// vocabulary; kvc takes its length as window=. As kvpress, the kept keys are re-rotated to the positions 0..n−1
// (key_rerotation) unless rerotate=0. Usage: finch:window=24,chunk=512.
#include <algorithm>
#include <vector>

#include "press/press.h"

namespace kvc {
namespace {

class FinchScorer : public Scorer {
 public:
  FinchScorer(int64_t window, int64_t chunk, bool normalize) : window_(window), chunk_(chunk), normalize_(normalize) {}
  AttentionProbe probe() const override { return {false, window_}; }
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor probs = in.step->stats.window_probs.to(at::kDouble);  // [heads, W, S]
    const int64_t w = probs.size(1), s = probs.size(2);
    at::Tensor weighted = probs;
    if (normalize_) {
      // Query i of the window sits at position s − w + i of the prompt.
      const at::Tensor counts = at::arange(s - w, s, probs.options()).view({1, w, 1});
      weighted = probs * counts;
    }
    const at::Tensor scores = aggregate_heads(weighted.sum(1), in.num_kv_heads, in.agg);
    const at::Tensor importance = protect_ends(scores, 0, w);
    if (chunk_ <= 0 || in.budget >= s) return importance;
    // Chunked: every chunk keeps its own top share; the kept entries of all chunks outrank every other.
    const std::vector<int64_t> keep = chunk_budgets(s, chunk_, in.budget);
    at::Tensor out = at::full_like(importance, -1.0);
    for (size_t c = 0; c < keep.size(); ++c) {
      if (keep[c] == 0) continue;
      const int64_t a = static_cast<int64_t>(c) * chunk_;
      const at::Tensor top = std::get<1>(importance.narrow(1, a, std::min(chunk_, s - a)).topk(keep[c], 1)) + a;
      // Ranked as within the chunk, above every entry left out of all chunks.
      out.scatter_(1, top, importance.gather(1, top).clamp_min(0) + 1.0);
    }
    return out;
  }

 private:
  int64_t window_, chunk_;
  bool normalize_;
};

PressConfig build(const PressParams& p) {
  p.check_known_keys({"window", "chunk", "normalize", "rerotate", "agg", "heads"});
  if (get_flag(p, "rerotate", true)) {
    // key_rerotation around this same press without re-rotation of its own.
    PressParams wrapped = p;
    wrapped.name = "key_rerotation";
    wrapped.values["base"] = p.name;
    wrapped.values["rerotate"] = "0";
    return build_method_config(wrapped);
  }
  const int64_t window = p.get_int("window", 32);
  const int64_t chunk = p.get_int("chunk", 0);
  KVC_CHECK(window >= 1, "--press {}: window (the question's tokens) must be >= 1, got {}", p.name, window);
  KVC_CHECK(chunk >= 0, "--press {}: chunk must be >= 0 (0: the whole context at once), got {}", p.name, chunk);
  PressConfig c;
  parse_common(p, c);
  c.scorer = std::make_shared<FinchScorer>(window, chunk, get_flag(p, "normalize", true));
  return c;
}

}  // namespace

void register_finch() {
  register_method("finch",
                  "attention of the question (the last window= tokens) on the context, each query weighted by its "
                  "position, optionally chunk by chunk; keys re-rotated (FINCH, TACL 2024, kvpress' FinchPress; "
                  "window=32,chunk=0,normalize=1,rerotate=1)",
                  build);
}

}  // namespace kvc
