// The kvpress presses that act on more than a per-entry ranking, against brute-force readings of their
// definitions on stories260K in float64: KVzip (attention of a reconstruction of the context), KeyRerotation
// (kept keys moved to continuous positions), ThinK (key channels pruned per head), SimLayerKV (lazy layers)
// and DuoAttention (streaming heads). The brute force runs the model's own forward pass and recomputes every
// attention, rotation and ranking here in plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "model/llama_model.h"
#include "press/channel_pruned_cache.h"
#include "press/press.h"
#include "press/press_registry.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <fmt/format.h>

namespace kvc {
namespace {

const LlamaModel& model() {
  static auto m = [] {
    LoadOptions options;
    options.dtype = "float64";
    return LlamaModel::load(test::model_dir("stories260K"), options);
  }();
  return *m;
}

const Tokenizer& tokenizer() {
  static const Tokenizer tok = Tokenizer::load(test::model_dir("stories260K"));
  return tok;
}

std::vector<int> prompt(int64_t n) {
  static const std::vector<int> ids = tokenizer().encode_prompt(
      test::slurp(test::data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 4000));
  return std::vector<int>(ids.begin(), ids.begin() + n);
}

// Every layer's step of an uncompressed forward pass.
class StepRecorder : public ForwardObserver {
 public:
  void after_attention(const LayerStep& step, KVCache&) override { steps.push_back(step); }
  std::vector<LayerStep> steps;
};

std::vector<LayerStep> run_steps(const std::vector<int>& ids) {
  StepRecorder rec;
  KVCache kv = model().new_cache();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = &rec;
  model().forward(ids, kv, o);
  return rec.steps;
}

// The cache a press leaves after a prefill of `ids`.
KVCache compressed(const std::string& press, const std::vector<int>& ids, double ratio, int64_t budget = 0) {
  CompressionSpec spec;
  spec.press = press;
  spec.ratio = ratio;
  spec.budget = budget;
  const CacheSetup setup = build_cache_setup(spec, model());
  KVCache cache = setup.new_cache(model());
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model().forward(ids, cache, o);
  return cache;
}

std::set<int64_t> as_set(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::set<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

using Matrix = std::vector<std::vector<double>>;

std::vector<double> row(const at::Tensor& t, int64_t h, int64_t i) {
  const at::Tensor r = t[h][i].to(at::kDouble).contiguous();
  return std::vector<double>(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double angle(int64_t position, int64_t i) {
  const ModelConfig& c = model().config();
  return static_cast<double>(position) * std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / c.head_dim);
}

// Hugging Face's rotate_half RoPE of one vector by `position` (negative: the inverse rotation).
std::vector<double> rotate(const std::vector<double>& x, int64_t position) {
  const size_t half = x.size() / 2;
  std::vector<double> out(x.size());
  for (size_t i = 0; i < half; ++i) {
    const double a = angle(position, static_cast<int64_t>(i));
    out[i] = x[i] * std::cos(a) - x[i + half] * std::sin(a);
    out[i + half] = x[i + half] * std::cos(a) + x[i] * std::sin(a);
  }
  return out;
}

// Causal softmax attention of query t of head h over keys 0..t of a recorded step (queries rotated, keys
// rotated here), scaled by 1/sqrt(d).
std::vector<double> attention_row(const LayerStep& s, int64_t h, int64_t t) {
  const ModelConfig& c = model().config();
  const int64_t kv = h / (c.num_heads / c.num_kv_heads);
  const std::vector<double> q = row(s.queries, h, t);
  std::vector<double> p;
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= t; ++j) {
    p.push_back(dot(q, rotate(row(s.keys, kv, j), s.positions[j].item<int64_t>())) / std::sqrt(double(c.head_dim)));
    mx = std::max(mx, p.back());
  }
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - mx));
  for (double& v : p) v /= sum;
  return p;
}

// ---- KVzip ----

// KVzip: the model reads the context, kvpress' repeat prompt, "\n" and the context again; an entry scores the
// most attention any query of that reconstruction pays it (max over those queries and over the query heads of
// its KV group), the first 4 entries are kept, and the global top budget × layers × heads entries are kept
// wherever they fall. The brute force runs that whole sequence as one ordinary prompt.
TEST(PressReconstruction, KVzipKeepsTheGlobalTopOfTheReconstructionsAttention) {
  const ModelConfig& c = model().config();
  const int64_t S = 40, budget = 12, sinks = 4, L = c.num_layers, KV = c.num_kv_heads;
  const std::vector<int> context = prompt(S);
  std::vector<int> ids = context;
  for (const std::string& text : {std::string("\n\nRepeat the previous context exactly."), std::string("\n")}) {
    const std::vector<int> part = tokenizer().encode(text);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  ids.insert(ids.end(), context.begin(), context.end());
  const auto steps = run_steps(ids);
  const int64_t T = static_cast<int64_t>(ids.size()), group = c.num_heads / KV;
  std::vector<std::tuple<double, int64_t, int64_t, int64_t>> all;  // score, layer, head, entry
  for (int64_t l = 0; l < L; ++l) {
    Matrix score(static_cast<size_t>(KV), std::vector<double>(static_cast<size_t>(S), 0.0));
    for (int64_t h = 0; h < c.num_heads; ++h)
      for (int64_t t = S; t < T; ++t) {
        const std::vector<double> p = attention_row(steps[static_cast<size_t>(l)], h, t);
        for (int64_t j = 0; j < S; ++j) {
          double& s = score[static_cast<size_t>(h / group)][static_cast<size_t>(j)];
          s = std::max(s, p[static_cast<size_t>(j)]);
        }
      }
    for (int64_t h = 0; h < KV; ++h)
      for (int64_t j = 0; j < S; ++j)
        all.emplace_back(j < sinks ? 2.0 : score[static_cast<size_t>(h)][static_cast<size_t>(j)], l, h, j);
  }
  std::sort(all.rbegin(), all.rend());
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> expect;
  for (int64_t i = 0; i < budget * L * KV; ++i) {
    const auto& [s, l, h, j] = all[static_cast<size_t>(i)];
    expect[{l, h}].insert(j);
  }
  const KVCache cache = compressed("kvzip", context, 0, budget);
  std::set<int64_t> sizes;
  for (int64_t l = 0; l < L; ++l) {
    const auto heads = test::head_positions(cache.layer(l));
    ASSERT_EQ(static_cast<int64_t>(heads.size()), KV);
    for (int64_t h = 0; h < KV; ++h) {
      EXPECT_EQ(as_set(heads[static_cast<size_t>(h)]), (expect[{l, h}])) << "layer " << l << " head " << h;
      sizes.insert(heads[static_cast<size_t>(h)].numel());
    }
  }
  EXPECT_GT(sizes.size(), 1u) << "one budget over layers and heads gives heads different sizes";
}

// layerwise=1: each layer keeps budget × heads entries, the top of its own scores across its heads.
TEST(PressReconstruction, KVzipLayerwiseKeepsEachLayersShare) {
  const ModelConfig& c = model().config();
  const int64_t S = 40, budget = 12;
  const KVCache cache = compressed("kvzip:layerwise=1", prompt(S), 0, budget);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    int64_t total = 0;
    for (const at::Tensor& h : test::head_positions(cache.layer(l))) {
      total += h.numel();
      for (int64_t s = 0; s < 4; ++s) EXPECT_TRUE(as_set(h).count(s)) << "sink " << s << " of layer " << l;
    }
    EXPECT_EQ(total, budget * c.num_kv_heads) << "layer " << l;
  }
}

TEST(PressReconstruction, KVzipParametersAreCheckedInOneLine) {
  for (const std::string& spec : {"kvzip:sinks=-1", "kvzip:layerwise=2", "kvzip:agg=sum", "kvzip:chunk=2048"}) {
    try {
      CompressionSpec s;
      s.press = spec;
      s.ratio = 0.5;
      build_cache_setup(s, model());
      ADD_FAILURE() << spec << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("kvzip"), std::string::npos) << what;
    }
  }
}

// ---- KeyRerotation ----

// The base's kept entries (Knorm here), each key rotated from its position p to its rank i among the kept
// (RoPE by i − p, by hand), the positions 0..n−1, the next token at n; values untouched.
TEST(PressReconstruction, KeyRerotationMovesKeptKeysToContinuousPositions) {
  const int64_t S = 40, budget = 16;
  const KVCache base = compressed("knorm", prompt(S), 0, budget);
  const KVCache moved = compressed("key_rerotation:base=knorm", prompt(S), 0, budget);
  // The next token sits right after the kept entries (kvpress feeds it at the compressed cache's length),
  // where without re-rotation it sits after the whole prompt.
  EXPECT_EQ(moved.next_position(), budget);
  EXPECT_EQ(base.next_position(), S);
  for (int64_t l = 0; l < base.num_layers(); ++l) {
    const auto* b = dynamic_cast<const DenseLayerCache*>(&base.layer(l));
    const auto* m = dynamic_cast<const DenseLayerCache*>(&moved.layer(l));
    ASSERT_TRUE(b != nullptr && m != nullptr);
    ASSERT_EQ(m->size(), budget);
    for (int64_t h = 0; h < b->keys().size(0); ++h)
      for (int64_t i = 0; i < budget; ++i) {
        const int64_t p = b->positions()[h][i].item<int64_t>();
        EXPECT_EQ(m->positions()[h][i].item<int64_t>(), i);
        const std::vector<double> expect = rotate(rotate(row(b->keys(), h, i), -p), i);
        const std::vector<double> got = row(m->keys(), h, i);
        for (size_t c = 0; c < got.size(); ++c) ASSERT_NEAR(got[c], expect[c], 1e-9) << "layer " << l << " head " << h;
        EXPECT_TRUE(at::equal(m->values()[h][i], b->values()[h][i]));
      }
  }
}

// A base that keeps different numbers per head cannot take continuous positions per head; one line.
TEST(PressReconstruction, KeyRerotationRefusesPerHeadBases) {
  CompressionSpec s;
  s.press = "key_rerotation:base=ada";
  s.ratio = 0.5;
  try {
    build_cache_setup(s, model());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("key_rerotation"), std::string::npos);
  }
}

// ---- ThinK ----

// Channel scores: mean square of the last `window` rotated queries, averaged over the KV group, times the mean
// square of the rotated keys; the int(d · 0.5) lowest go. The layer then stores only the others, and attends as
// the dense cache with those channels zeroed (kvpress' ThinKPress) does, also for a token added after it.
TEST(PressReconstruction, ThinKStoresTheTopChannelsAndAttendsAsZeroedKeys) {
  const ModelConfig& c = model().config();
  const int64_t S = 40, window = 8, d = c.head_dim, KV = c.num_kv_heads, group = c.num_heads / KV;
  const std::vector<int> ids = prompt(S + 1);
  const std::vector<int> context(ids.begin(), ids.begin() + S);
  const auto steps = run_steps(context);
  KVCache think = compressed("think:channels=0.5,window=8", context, 0);
  KVCache zeroed = model().new_cache();
  model().forward(context, zeroed);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerStep& s = steps[static_cast<size_t>(l)];
    const auto* layer = dynamic_cast<const ChannelPrunedLayerCache*>(&think.layer(l));
    ASSERT_NE(layer, nullptr) << "layer " << l << " is " << think.layer(l).layout();
    ASSERT_EQ(layer->channels().size(1), d / 2);
    for (int64_t h = 0; h < KV; ++h) {
      std::vector<std::pair<double, int64_t>> score;
      for (int64_t ch = 0; ch < d; ++ch) {
        double q2 = 0, k2 = 0;
        for (int64_t g = 0; g < group; ++g)
          for (int64_t t = S - window; t < S; ++t) q2 += std::pow(s.queries[h * group + g][t][ch].item<double>(), 2);
        for (int64_t t = 0; t < S; ++t)
          k2 += std::pow(rotate(row(s.keys, h, t), s.positions[t].item<int64_t>())[static_cast<size_t>(ch)], 2);
        score.emplace_back(q2 / double(group * window) * k2 / double(S), ch);
      }
      std::sort(score.rbegin(), score.rend());
      std::set<int64_t> expect;
      for (int64_t i = 0; i < d / 2; ++i) expect.insert(score[static_cast<size_t>(i)].second);
      EXPECT_EQ(as_set(layer->channels()[h]), expect) << "layer " << l << " head " << h;
      // The reference: the dense cache with the other channels zeroed in place.
      const at::Tensor keys = require_mergeable_rows(zeroed.layer(l), "test").merge_rows().keys;
      for (int64_t ch = 0; ch < d; ++ch)
        if (!expect.count(ch)) keys[h].select(1, ch).zero_();
    }
    // Keys take half their bytes; values and the channel indices as they are.
    const int64_t entry_bytes = static_cast<int64_t>(sizeof(double)) * (d / 2 + d);
    EXPECT_EQ(layer->footprint().payload_bytes, KV * S * entry_bytes) << "layer " << l;
  }
  const std::vector<int> next{ids[static_cast<size_t>(S)]};
  const at::Tensor got = model().forward(next, think), expect = model().forward(next, zeroed);
  EXPECT_TRUE(at::allclose(got, expect, 1e-9, 1e-9)) << (got - expect).abs().max().item<double>();
  EXPECT_EQ(think.layer(0).lengths()[0].item<int64_t>(), S + 1);
}

// --ratio without base= is refused in one line (ThinK sizes itself by channels=); base= evicts tokens first.
TEST(PressReconstruction, ThinKWithABaseEvictsTokensThenChannels) {
  CompressionSpec s;
  s.press = "think:channels=0.25";
  s.ratio = 0.5;
  EXPECT_THROW(build_cache_setup(s, model()), Error);
  const KVCache cache = compressed("think:channels=0.25,base=knorm", prompt(40), 0.5);
  const KVCache knorm = compressed("knorm", prompt(40), 0.5);
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    const auto* layer = dynamic_cast<const ChannelPrunedLayerCache*>(&cache.layer(l));
    ASSERT_NE(layer, nullptr);
    EXPECT_EQ(layer->channels().size(1), model().config().head_dim - model().config().head_dim / 4);
    const auto a = test::head_positions(cache.layer(l)), b = test::head_positions(knorm.layer(l));
    for (size_t h = 0; h < a.size(); ++h) EXPECT_EQ(as_set(a[h]), as_set(b[h]));
  }
}

// ---- SimLayerKV ----

// A layer is lazy when its last query's attention (softmax over the prompt), averaged over heads, puts more
// than the threshold on the first 4 entries and the 16 before the query; a lazy layer keeps its first 4 and
// last 15 entries. The threshold is set between the layers' masses so that both kinds occur.
TEST(PressReconstruction, SimLayerKVKeepsSinksAndRecentInLazyLayersOnly) {
  const ModelConfig& c = model().config();
  const int64_t S = 64, sinks = 4, recent = 16;
  const auto steps = run_steps(prompt(S));
  std::vector<double> mass;
  for (const LayerStep& s : steps) {
    std::vector<double> mean(static_cast<size_t>(S), 0.0);
    for (int64_t h = 0; h < c.num_heads; ++h) {
      const std::vector<double> p = attention_row(s, h, S - 1);
      for (int64_t j = 0; j < S; ++j) mean[static_cast<size_t>(j)] += p[static_cast<size_t>(j)] / double(c.num_heads);
    }
    double m = 0;
    for (int64_t j = 0; j < sinks; ++j) m += mean[static_cast<size_t>(j)];
    for (int64_t j = S - 1 - recent; j < S - 1; ++j) m += mean[static_cast<size_t>(j)];
    mass.push_back(m);
  }
  std::vector<double> sorted = mass;
  std::sort(sorted.begin(), sorted.end());
  const double threshold = (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  const KVCache cache =
      compressed(fmt::format("simlayerkv:threshold={},recent={},sinks={}", threshold, recent, sinks), prompt(S), 0);
  int lazy = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::set<int64_t> expect;
    for (int64_t j = 0; j < S; ++j)
      if (mass[static_cast<size_t>(l)] <= threshold || j < sinks || j >= S - (recent - 1)) expect.insert(j);
    lazy += mass[static_cast<size_t>(l)] > threshold;
    for (const at::Tensor& h : test::head_positions(cache.layer(l))) EXPECT_EQ(as_set(h), expect) << "layer " << l;
  }
  EXPECT_GT(lazy, 0);
  EXPECT_LT(lazy, c.num_layers);
}

// ---- DuoAttention ----

// Head scores on the fly: the prompt's mean query (per query head, before RoPE) at the last of n positions
// against its mean key (per KV head) at positions 0..n−1, softmax, mean of the cumulative sum, averaged over the
// KV group. Returns (score, layer * KV + head), lowest first.
std::vector<std::pair<double, int64_t>> duo_heads_lowest_first(const std::vector<LayerStep>& steps, int64_t S,
                                                               int64_t n) {
  const ModelConfig& c = model().config();
  const int64_t KV = c.num_kv_heads, group = c.num_heads / KV, d = c.head_dim;
  std::vector<std::pair<double, int64_t>> scores;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerStep& s = steps[static_cast<size_t>(l)];
    for (int64_t kv = 0; kv < KV; ++kv) {
      std::vector<double> k(static_cast<size_t>(d), 0.0);
      for (int64_t t = 0; t < S; ++t) {
        const auto r = row(s.keys, kv, t);
        for (int64_t i = 0; i < d; ++i) k[static_cast<size_t>(i)] += r[static_cast<size_t>(i)] / double(S);
      }
      double total = 0;
      for (int64_t g = 0; g < group; ++g) {
        std::vector<double> q(static_cast<size_t>(d), 0.0);
        for (int64_t t = 0; t < S; ++t) {
          const auto r = rotate(row(s.queries, kv * group + g, t), -s.positions[t].item<int64_t>());
          for (int64_t i = 0; i < d; ++i) q[static_cast<size_t>(i)] += r[static_cast<size_t>(i)] / double(S);
        }
        const std::vector<double> last = rotate(q, n - 1);
        std::vector<double> p;
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          p.push_back(dot(last, rotate(k, j)) / std::sqrt(double(d)));
          mx = std::max(mx, p.back());
        }
        for (double& v : p) sum += (v = std::exp(v - mx));
        double cumulative = 0, area = 0;
        for (double v : p) area += (cumulative += v / sum) / double(n);
        total += area / double(group);
      }
      scores.emplace_back(total, l * KV + kv);
    }
  }
  std::sort(scores.begin(), scores.end());
  return scores;
}

// Every head of `cache` keeps all S entries, or, for the heads in `streaming`, its first `sinks` and last `recent`.
void expect_streaming_heads(const KVCache& cache, const std::set<int64_t>& streaming, int64_t S, int64_t sinks,
                            int64_t recent) {
  const ModelConfig& c = model().config();
  const int64_t KV = c.num_kv_heads;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto heads = test::head_positions(cache.layer(l));
    for (int64_t h = 0; h < KV; ++h) {
      std::set<int64_t> expect;
      for (int64_t j = 0; j < S; ++j)
        if (!streaming.count(l * KV + h) || j < sinks || j >= S - recent) expect.insert(j);
      EXPECT_EQ(as_set(heads[static_cast<size_t>(h)]), expect) << "layer " << l << " head " << h;
    }
  }
}

// streaming=0.5: the lowest half of all layers' heads keep their first 4 and last 8 entries, the others everything.
TEST(PressReconstruction, DuoAttentionStreamsTheLowestScoredHeads) {
  const int64_t S = 40, n = 64, sinks = 4, recent = 8;
  const auto scores = duo_heads_lowest_first(run_steps(prompt(S)), S, n);
  std::set<int64_t> streaming;
  for (size_t i = 0; i < scores.size() / 2; ++i) streaming.insert(scores[i].second);
  const KVCache cache = compressed(
      fmt::format("duo_attention:streaming=0.5,sinks={},recent={},positions={}", sinks, recent, n), prompt(S), 0);
  expect_streaming_heads(cache, streaming, S, sinks, recent);
}

// Without streaming=, --ratio r (or --budget B) streams the m lowest-scored heads that remove that share of the
// cache: m = round((S − B) · heads / (S − sinks − recent)), B = S · (1 − r), at most every head; the cache kept is
// then the ratio's within half a head's share.
TEST(PressReconstruction, DuoAttentionAtARatioStreamsAsManyHeadsAsRemoveThatShare) {
  const ModelConfig& c = model().config();
  const int64_t S = 40, n = 64, sinks = 4, recent = 8, heads = c.num_layers * c.num_kv_heads;
  const auto scores = duo_heads_lowest_first(run_steps(prompt(S)), S, n);
  const std::string spec = fmt::format("duo_attention:sinks={},recent={},positions={}", sinks, recent, n);
  for (const double ratio : {0.1, 0.3, 0.55, 0.7, 0.95}) {
    SCOPED_TRACE(ratio);
    const double dropped = ratio * double(S) * double(heads);
    const auto m = std::min<int64_t>(heads, std::llround(dropped / double(S - sinks - recent)));
    std::set<int64_t> streaming;
    for (int64_t i = 0; i < m; ++i) streaming.insert(scores[static_cast<size_t>(i)].second);
    const KVCache cache = compressed(spec, prompt(S), ratio);
    expect_streaming_heads(cache, streaming, S, sinks, recent);
    int64_t kept = 0;
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (const at::Tensor& h : test::head_positions(cache.layer(l))) kept += h.numel();
    const double removed = 1.0 - double(kept) / double(S * heads);
    if (m < heads) {
      EXPECT_NEAR(removed, ratio, 0.5 * double(S - sinks - recent) / double(S * heads));
    } else {
      EXPECT_LE(removed, ratio + 1e-12);  // every head streams: the most it can remove
    }
  }
  const int64_t budget = 22;
  const auto m = std::llround(double(S - budget) * double(heads) / double(S - sinks - recent));
  std::set<int64_t> streaming;
  for (int64_t i = 0; i < m; ++i) streaming.insert(scores[static_cast<size_t>(i)].second);
  expect_streaming_heads(compressed(spec, prompt(S), 0, budget), streaming, S, sinks, recent);
}

// The presses that size themselves refuse --ratio in one line naming the press.
TEST(PressReconstruction, SelfSizedPressesRefuseARatio) {
  for (const std::string& spec : {"simlayerkv:threshold=0.5", "duo_attention:streaming=0.5", "think"}) {
    CompressionSpec s;
    s.press = spec;
    s.ratio = 0.5;
    try {
      build_cache_setup(s, model());
      ADD_FAILURE() << spec << " took --ratio";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(spec.substr(0, spec.find(':'))), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvc
