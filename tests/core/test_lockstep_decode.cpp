// Decoding several sequences in lockstep (LlamaModel::forward_lockstep, run_decode_loops_lockstep), against
// each sequence decoded alone: the products of several inputs give each input's own product bit for bit,
// and a lockstep step gives each sequence the logits, cache and observer state of its own step, on dense
// weights and on the real models' GGUF blocks (Gemma 3's sliding layers and norms included), with presses
// that act while decoding.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <filesystem>

#include "compression/compression_spec.h"
#include "generation/lockstep_decode.h"
#include "kernels/matvec.h"
#include "model/linear_weight.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace kvc {
namespace {

class Lockstep : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(2); }
};

TEST_F(Lockstep, DenseProductsOfManyInputsAreEachInputsOwnBitForBit) {
  // Small matrices run on one thread; 2304 rows of 768 split over both.
  for (at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 13}, {2304, 768}, {5, 4099}}) {
      const at::Tensor w = at::randn({rows, cols}).to(type), bias = at::randn({rows});
      for (int64_t inputs : {2, 5}) {
        const at::Tensor xs = at::randn({inputs, cols});
        const at::Tensor each = fast_matvec_each(w, xs, bias);
        ASSERT_TRUE(each.defined());
        const LinearWeight weight(w);
        const at::Tensor applied = weight.apply_each(xs, bias);
        for (int64_t i = 0; i < inputs; ++i) {
          const at::Tensor own = fast_matvec(w, xs[i], bias);
          EXPECT_TRUE(each[i].equal(own)) << type << " " << rows << "x" << cols << " input " << i;
          EXPECT_TRUE(applied[i].equal(weight.apply(xs.narrow(0, i, 1), bias)[0])) << type << " input " << i;
        }
      }
    }
  }
  EXPECT_FALSE(fast_matvec_each(at::randn({4, 8}).t(), at::randn({2, 4}), {}).defined());  // not contiguous
  EXPECT_FALSE(fast_matvec_each(at::randn({4, 8}), at::randn({8}), {}).defined());         // not a batch
}

struct Sequence {
  KVCache cache;
  std::unique_ptr<ForwardObserver> observer;
  ForwardOptions options() { return ForwardOptions{false, observer.get()}; }
};

// `setups` each fed its own prompt (a different length each, so positions differ): twins made the same way.
std::vector<Sequence> prefilled(const LlamaModel& model, const std::vector<CacheSetup>& setups,
                                const std::vector<std::vector<int>>& prompts) {
  std::vector<Sequence> out;
  for (size_t i = 0; i < setups.size(); ++i) {
    Sequence s{setups[i].new_cache(model), setups[i].new_observer()};
    model.forward(prompts[i], s.cache, s.options());
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<CacheSetup> decoding_setups(const LlamaModel& model) {
  std::vector<CacheSetup> setups;
  // h2o and d2o evict while decoding (h2o reads each step's attention), dms:decoding=1 scores each new token.
  for (const std::string& press :
       {"none", "snapkv", "h2o", "d2o", "dms:base=keydiff,threshold=-0.5,window=4,decoding=1"}) {
    CompressionSpec c;
    c.press = press;
    c.ratio = press == "none" || press.rfind("dms", 0) == 0 ? 0.0 : 0.5;
    setups.push_back(build_cache_setup(c, model));
  }
  return setups;
}

std::vector<std::vector<int>> prompts(const LlamaModel& model, size_t count) {
  std::vector<std::vector<int>> out;
  for (size_t i = 0; i < count; ++i) {
    std::vector<int> p;
    for (size_t t = 0; t < 40 + 7 * i; ++t) p.push_back(static_cast<int>((t * 37 + i * 11 + 5) % 200 + 3));
    out.push_back(p);
  }
  return out;
}

void expect_steps_equal_their_own(const std::string& path) {
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed (scripts/setup.sh)";
  const auto model = LlamaModel::load(path);
  const std::vector<CacheSetup> setups = decoding_setups(*model);
  const auto fed = prompts(*model, setups.size());
  std::vector<Sequence> alone = prefilled(*model, setups, fed), together = prefilled(*model, setups, fed);
  std::vector<int> next(setups.size());
  for (size_t i = 0; i < setups.size(); ++i) next[i] = static_cast<int>(i * 13 + 7);
  for (int step = 0; step < 8; ++step) {
    std::vector<KVCache*> caches;
    std::vector<ForwardOptions> options;
    for (Sequence& s : together) {
      caches.push_back(&s.cache);
      options.push_back(s.options());
    }
    const at::Tensor joint = model->forward_lockstep(next, caches, options);
    ASSERT_EQ(joint.size(0), static_cast<int64_t>(setups.size()));
    for (size_t i = 0; i < setups.size(); ++i) {
      const at::Tensor own = model->forward({next[i]}, alone[i].cache, alone[i].options());
      ASSERT_TRUE(joint.narrow(0, static_cast<int64_t>(i), 1).equal(own))
          << setups[i].name << ", step " << step << ": max difference "
          << (joint.narrow(0, static_cast<int64_t>(i), 1) - own).abs().max().item<float>();
      next[i] = static_cast<int>(own[0].argmax().item<int64_t>());
    }
  }
  for (size_t i = 0; i < setups.size(); ++i) {
    EXPECT_EQ(together[i].cache.next_position(), alone[i].cache.next_position()) << setups[i].name;
    EXPECT_EQ(together[i].cache.footprint().payload_bytes, alone[i].cache.footprint().payload_bytes) << setups[i].name;
  }
}

TEST_F(Lockstep, StepsGiveEachSequenceItsOwnStepOnDenseWeights) {
  expect_steps_equal_their_own(test::model_dir("kvc-micro-lm"));
}
TEST_F(Lockstep, StepsGiveEachSequenceItsOwnStepOnSmolLM2Blocks) { expect_steps_equal_their_own(test::smollm2_gguf()); }
TEST_F(Lockstep, StepsGiveEachSequenceItsOwnStepOnGemma3Blocks) { expect_steps_equal_their_own(test::gemma3_gguf()); }

TEST_F(Lockstep, LoopsStopAndFeedEachSequenceAsItsOwnLoopWould) {
  const auto model = LlamaModel::load(test::model_dir("kvc-micro-lm"));
  const std::vector<CacheSetup> setups = decoding_setups(*model);
  const auto fed = prompts(*model, setups.size());
  for (int64_t max_new : {0, 1, 6}) {
    SCOPED_TRACE(max_new);
    std::vector<Sequence> alone = prefilled(*model, setups, fed), together = prefilled(*model, setups, fed);
    DecodeLimits limits;
    limits.max_new_tokens = max_new;
    const auto greedy = [](const at::Tensor& logits) { return static_cast<int>(logits[0].argmax().item<int64_t>()); };
    // Sequence i stops itself after i + 1 tokens (the last one runs into max_new_tokens).
    const auto keeper = [](size_t i, std::vector<int>& kept) {
      return [i, &kept](int token) {
        kept.push_back(token);
        return kept.size() == i + 1 ? std::string("enough") : std::string();
      };
    };
    std::vector<std::vector<int>> own(setups.size()), joint(setups.size());
    std::vector<std::string> own_reasons;
    std::vector<LockstepSequence> sequences(setups.size());
    for (size_t i = 0; i < setups.size(); ++i) {
      const at::Tensor first = model->forward({static_cast<int>(i + 3)}, alone[i].cache, alone[i].options());
      const at::Tensor first_joint =
          model->forward({static_cast<int>(i + 3)}, together[i].cache, together[i].options());
      own_reasons.push_back(run_decode_loop(*model, alone[i].cache, first, limits, alone[i].options(), greedy,
                                            keeper(i == setups.size() - 1 ? 100 : i, own[i])));
      sequences[i].cache = &together[i].cache;
      sequences[i].logits = first_joint;
      sequences[i].options = together[i].options();
      sequences[i].keep = keeper(i == setups.size() - 1 ? 100 : i, joint[i]);
    }
    run_decode_loops_lockstep(*model, sequences, limits, greedy);
    for (size_t i = 0; i < setups.size(); ++i) {
      EXPECT_EQ(joint[i], own[i]) << setups[i].name;
      EXPECT_EQ(sequences[i].stop_reason, own_reasons[i]) << setups[i].name;
      EXPECT_EQ(together[i].cache.next_position(), alone[i].cache.next_position()) << setups[i].name;
    }
    if (max_new == 6) {
      EXPECT_EQ(own_reasons.back(), "max_new_tokens");
      EXPECT_EQ(own_reasons.front(), "enough");
    }
  }
}

TEST_F(Lockstep, MismatchedArgumentsAreRefused) {
  const auto model = LlamaModel::load(test::model_dir("kvc-micro-lm"));
  KVCache cache = model->new_cache(), other = model->new_cache();
  EXPECT_THROW(model->forward_lockstep({}, {}, {}), std::exception);
  EXPECT_THROW(model->forward_lockstep({1, 2}, {&cache}, {ForwardOptions{}}), std::exception);
  EXPECT_THROW(model->forward_lockstep({model->config().vocab_size, 1}, {&cache, &other}, {{}, {}}), std::exception);
  EXPECT_THROW(model->forward_lockstep({1, 2}, {&cache, &cache}, {{}, {}}), std::exception);  // one cache twice
  EXPECT_EQ(cache.next_position(), 0);
}

}  // namespace
}  // namespace kvc
