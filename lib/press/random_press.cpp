// Random eviction: a seeded baseline. Scores hash (seed, layer, head, position), so they do not
// depend on any global RNG state and repeat exactly.
#include "press/keyed_draw.h"
#include "press/press.h"

namespace kvc {
namespace {

class RandomScorer : public Scorer {
 public:
  explicit RandomScorer(uint64_t seed) : seed_(seed) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor pos = in.positions.to(at::kCPU, at::kLong).contiguous();
    at::Tensor out = at::empty(pos.sizes(), at::kDouble);
    const int64_t kv = pos.size(0), s = pos.size(1);
    const int64_t* p = pos.data_ptr<int64_t>();
    double* o = out.data_ptr<double>();
    for (int64_t h = 0; h < kv; ++h) {
      for (int64_t i = 0; i < s; ++i) o[h * s + i] = keyed_draw(seed_, in.layer, h, p[h * s + i]);
    }
    return out.to(in.positions.device());
  }

 private:
  uint64_t seed_;
};

}  // namespace

void register_random() {
  register_method("random", "uniformly random entries, seeded (seed=0)", [](const PressParams& p) {
    p.check_known_keys({"seed", "agg", "heads"});
    PressConfig c;
    c.scorer = std::make_shared<RandomScorer>(static_cast<uint64_t>(p.get_int("seed", 0)));
    return c;
  });
}

}  // namespace kvc
