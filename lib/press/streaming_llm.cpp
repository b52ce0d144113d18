// StreamingLLM (Xiao et al. 2023): attention sinks (the first tokens) + a window of recent tokens.
#include "press/press.h"

namespace kvc {
namespace {

class StreamingScorer : public Scorer {
 public:
  explicit StreamingScorer(int64_t sinks) : sinks_(sinks) {}
  at::Tensor score(const ScoreInput& in) const override {
    // Recency is the only criterion; the sinks are protected above everything.
    return protect_ends(in.positions.to(at::kDouble), sinks_, 0, in.positions);
  }

 private:
  int64_t sinks_;
};

}  // namespace

void register_streaming_llm() {
  register_method("streaming_llm",
                  "sink tokens + recent window, evicts while decoding (StreamingLLM, arXiv:2309.17453; sinks=4)",
                  [](const PressParams& p) {
                    p.check_known_keys({"sinks", "agg", "heads"});
                    const int64_t sinks = p.get_int("sinks", 4);
                    KVC_CHECK(sinks >= 0, "--press streaming_llm: sinks must be >= 0");
                    PressConfig c;
                    c.scorer = std::make_shared<StreamingScorer>(sinks);
                    c.bounded = true;
                    return c;
                  });
}

}  // namespace kvc
