// The scorers of the kvpress catalogue (KeyDiff, ExpectedAttention, LagKV, LeverageScore, NonCausalAttention,
// CurDKV, Compactor, CriticalKV, CAPKV, Q-Filters) against brute-force readings of their definitions: plain
// loops in float64 over the steps a real prefill gives (stories260K in float64), with RoPE, the output
// projection's head slices and every normalisation written out here rather than taken from the library.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "compression/compression_spec.h"
#include "core/rope.h"
#include "model/linear_weight.h"
#include "model/llama_model.h"
#include "press/average_rope.h"
#include "press/leverage.h"
#include "press/press.h"
#include "press/press_registry.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/stories260k.h"
#include "util/error.h"

namespace kvc {
namespace {

const LlamaModel& model() { return test::stories260k_float64(); }

std::vector<int> prompt(int64_t n) { return test::tinystories_prompt(n); }

// Every layer's step of an uncompressed prefill, as a press sees it.
class StepRecorder : public ForwardObserver {
 public:
  void after_attention(const LayerStep& step, KVCache&) override { steps.push_back(step); }
  std::vector<LayerStep> steps;
};

const std::vector<LayerStep>& steps(int64_t n) {
  static std::map<int64_t, std::vector<LayerStep>> cache;
  auto& out = cache[n];
  if (out.empty()) {
    StepRecorder rec;
    KVCache kv = model().new_cache();
    ForwardOptions o;
    o.all_logits = false;
    o.observer = &rec;
    model().forward(prompt(n), kv, o);
    out = rec.steps;
  }
  return out;
}

ScoreInput input_for(const LayerStep& step, int64_t budget) {
  const ModelConfig& c = model().config();
  ScoreInput in;
  in.layer = step.layer;
  in.step = &step;
  in.budget = budget;
  in.num_heads = c.num_heads;
  in.num_kv_heads = c.num_kv_heads;
  return in;
}

at::Tensor scores_of(const std::string& spec, const ScoreInput& in, double ratio = 0.5) {
  PressParams p = PressParams::parse(spec);
  p.ratio = ratio;
  return build_method_config(p).scorer->score(in).to(at::kDouble);
}

// ---- Brute-force pieces, from the definitions ----

using Matrix = std::vector<std::vector<double>>;

double angle(int64_t position, int64_t i) {
  const ModelConfig& c = model().config();
  return static_cast<double>(position) * std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / c.head_dim);
}

// Hugging Face's rotate_half RoPE of one vector at `position` (sign −1: the inverse rotation).
std::vector<double> rotate(const std::vector<double>& x, int64_t position, double sign = 1.0) {
  const size_t half = x.size() / 2;
  std::vector<double> out(x.size());
  for (size_t i = 0; i < half; ++i) {
    const double a = sign * angle(position, static_cast<int64_t>(i));
    out[i] = x[i] * std::cos(a) - x[i + half] * std::sin(a);
    out[i + half] = x[i + half] * std::cos(a) + x[i] * std::sin(a);
  }
  return out;
}

std::vector<double> row(const at::Tensor& t, int64_t h, int64_t i) {
  const at::Tensor r = t[h][i].to(at::kDouble).contiguous();
  return std::vector<double>(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
double norm(const std::vector<double>& a) { return std::sqrt(dot(a, a)); }

// keys [kv][S][d] rotated by hand at the step's positions; queries before RoPE [H][S][d].
std::vector<Matrix> hand_rotated_keys(const LayerStep& s) {
  std::vector<Matrix> out(static_cast<size_t>(s.keys.size(0)));
  for (int64_t h = 0; h < s.keys.size(0); ++h)
    for (int64_t i = 0; i < s.keys.size(1); ++i)
      out[static_cast<size_t>(h)].push_back(rotate(row(s.keys, h, i), s.positions[i].item<int64_t>()));
  return out;
}
std::vector<Matrix> hand_prerope_queries(const LayerStep& s) {
  std::vector<Matrix> out(static_cast<size_t>(s.queries.size(0)));
  for (int64_t h = 0; h < s.queries.size(0); ++h)
    for (int64_t i = 0; i < s.queries.size(1); ++i)
      out[static_cast<size_t>(h)].push_back(rotate(row(s.queries, h, i), s.positions[i].item<int64_t>(), -1.0));
  return out;
}
std::vector<Matrix> rows_of(const at::Tensor& t) {
  std::vector<Matrix> out(static_cast<size_t>(t.size(0)));
  for (int64_t h = 0; h < t.size(0); ++h)
    for (int64_t i = 0; i < t.size(1); ++i) out[static_cast<size_t>(h)].push_back(row(t, h, i));
  return out;
}

// Solves A x = b by Gauss–Jordan elimination with partial pivoting (A small and well conditioned here).
std::vector<double> solve(Matrix a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = 0; c < n; ++c) b[c] /= a[c][c];
  return b;
}

void softmax_in_place(std::vector<double>& x) {
  double mx = -std::numeric_limits<double>::infinity(), sum = 0;
  for (double v : x) mx = std::max(mx, v);
  for (double& v : x) sum += (v = std::exp(v - mx));
  for (double& v : x) v /= sum;
}

// z-score over every value of `rows`, sample standard deviation.
std::vector<std::vector<double>> zscored(std::vector<std::vector<double>> rows) {
  double sum = 0, n = 0;
  for (const auto& r : rows)
    for (double v : r) sum += v, n += 1;
  const double mean = sum / n;
  double ss = 0;
  for (const auto& r : rows)
    for (double v : r) ss += (v - mean) * (v - mean);
  const double sd = std::max(std::sqrt(ss / (n - 1)), 1e-6);
  for (auto& r : rows)
    for (double& v : r) v = (v - mean) / sd;
  return rows;
}

// Expects the scores of entries [from, to) of every head to equal `expect` (absolute + relative tolerance).
void expect_rows(const at::Tensor& got, const std::vector<std::vector<double>>& expect, int64_t from, double tol,
                 const std::string& what) {
  for (size_t h = 0; h < expect.size(); ++h)
    for (size_t i = 0; i < expect[h].size(); ++i) {
      const double g = got[static_cast<int64_t>(h)][from + static_cast<int64_t>(i)].item<double>();
      ASSERT_NEAR(g, expect[h][i], tol * (1 + std::abs(expect[h][i]))) << what << " head " << h << " entry " << i;
    }
}

void expect_protected(const at::Tensor& got, int64_t from, int64_t to, const std::string& what) {
  for (int64_t h = 0; h < got.size(0); ++h)
    for (int64_t i = from; i < to; ++i) ASSERT_GE(got[h][i].item<double>(), kProtected) << what << " entry " << i;
}

constexpr int64_t kS = 72;

// ---- The scorers ----

TEST(PressScorers, AverageRotationIsTheMeanOfTheModelsRotations) {
  // R̄ against the model's own Rope applied to the basis vectors at every future position.
  const Rope& rope = *model().rope();
  const int64_t d = model().config().head_dim, first = 37, count = 23;
  const at::Tensor basis = at::eye(d, at::kDouble).unsqueeze(1).expand({d, count, d}).contiguous();
  const at::Tensor rotated = rope.apply(basis, at::arange(first, first + count, at::kLong));  // [j, t, :] = R(p_t) e_j
  const at::Tensor expect = rotated.mean(1).t();                                              // column j = R̄ e_j
  EXPECT_TRUE(at::allclose(average_rotation(rope, first, count), expect, 1e-12, 1e-12));
}

TEST(PressScorers, KeyDiffIsTheNegativeCosineToTheMeanUnitKey) {
  for (const LayerStep& step : steps(kS)) {
    const at::Tensor got = scores_of("keydiff", input_for(step, 36));
    const auto keys = hand_rotated_keys(step);
    std::vector<std::vector<double>> expect;
    for (const Matrix& k : keys) {
      std::vector<double> anchor(k[0].size(), 0.0);
      for (const auto& x : k)
        for (size_t c = 0; c < x.size(); ++c) anchor[c] += x[c] / norm(x) / static_cast<double>(k.size());
      std::vector<double> r;
      for (const auto& x : k) r.push_back(-dot(x, anchor) / (norm(x) * norm(anchor)));
      expect.push_back(r);
    }
    expect_rows(got, expect, 0, 1e-9, "keydiff layer " + std::to_string(step.layer));
  }
}

// E[exp(q·k/√d)] for q ~ N(R̄μ, R̄ΣR̄ᵀ), normalised over the keys after the sinks, averaged over each KV head's
// query heads, times ‖v‖; R̄ the mean of the explicit rotation matrices over the future positions.
std::vector<std::vector<double>> expected_attention(const LayerStep& step, int64_t sinks, int64_t future,
                                                    bool covariance, bool vnorm, double epsilon) {
  const auto keys = hand_rotated_keys(step), queries = hand_prerope_queries(step), values = rows_of(step.values);
  const size_t heads = queries.size(), kv = keys.size(), group = heads / kv, s = keys[0].size(), d = keys[0][0].size();
  const size_t half = d / 2;
  Matrix r(d, std::vector<double>(d, 0.0));
  for (int64_t p = static_cast<int64_t>(s); p < static_cast<int64_t>(s) + future; ++p) {
    for (size_t i = 0; i < half; ++i) {
      const double a = angle(p, static_cast<int64_t>(i)), w = 1.0 / static_cast<double>(future);
      r[i][i] += std::cos(a) * w;
      r[i + half][i + half] += std::cos(a) * w;
      r[i][i + half] -= std::sin(a) * w;
      r[i + half][i] += std::sin(a) * w;
    }
  }
  std::vector<std::vector<double>> out(kv, std::vector<double>(s - static_cast<size_t>(sinks), 0.0));
  for (size_t h = 0; h < heads; ++h) {
    const Matrix& q = queries[h];
    const size_t n = s - static_cast<size_t>(sinks);
    std::vector<double> mu(d, 0.0);
    for (size_t t = static_cast<size_t>(sinks); t < s; ++t)
      for (size_t c = 0; c < d; ++c) mu[c] += q[t][c] / static_cast<double>(n);
    Matrix cov(d, std::vector<double>(d, 0.0));
    for (size_t t = static_cast<size_t>(sinks); t < s; ++t)
      for (size_t a = 0; a < d; ++a)
        for (size_t b = 0; b < d; ++b) cov[a][b] += (q[t][a] - mu[a]) * (q[t][b] - mu[b]) / static_cast<double>(n);
    std::vector<double> mu_r(d, 0.0);
    Matrix cov_r(d, std::vector<double>(d, 0.0));
    for (size_t a = 0; a < d; ++a)
      for (size_t b = 0; b < d; ++b) mu_r[a] += r[a][b] * mu[b];
    for (size_t a = 0; a < d; ++a)
      for (size_t b = 0; b < d; ++b)
        for (size_t x = 0; x < d; ++x)
          for (size_t y = 0; y < d; ++y) cov_r[a][b] += r[a][x] * cov[x][y] * r[b][y];
    std::vector<double> logits;
    for (size_t j = static_cast<size_t>(sinks); j < s; ++j) {
      const std::vector<double>& k = keys[h / group][j];
      double l = dot(k, mu_r) / std::sqrt(static_cast<double>(d));
      if (covariance) {
        double quad = 0;
        for (size_t a = 0; a < d; ++a)
          for (size_t b = 0; b < d; ++b) quad += k[a] * cov_r[a][b] * k[b];
        l += quad / static_cast<double>(d) / 2;
      }
      logits.push_back(l);
    }
    softmax_in_place(logits);
    for (size_t j = 0; j < logits.size(); ++j) out[h / group][j] += logits[j] / static_cast<double>(group);
  }
  if (vnorm)
    for (size_t h = 0; h < kv; ++h)
      for (size_t j = 0; j < out[h].size(); ++j)
        out[h][j] = (out[h][j] + epsilon) * norm(values[h][j + static_cast<size_t>(sinks)]);
  return out;
}

TEST(PressScorers, ExpectedAttentionIsTheGaussianExpectationUnderAveragedRope) {
  for (const LayerStep& step : steps(kS)) {
    const std::string layer = " layer " + std::to_string(step.layer);
    const at::Tensor got = scores_of("expected_attention", input_for(step, 36));
    expect_protected(got, 0, 4, "sinks" + layer);
    expect_rows(got, expected_attention(step, 4, 512, true, true, 0.0), 4, 1e-8, "defaults" + layer);
    const at::Tensor variant =
        scores_of("expected_attention:sinks=2,future=64,covariance=0,vnorm=1,epsilon=0.01", input_for(step, 36));
    expect_rows(variant, expected_attention(step, 2, 64, false, true, 0.01), 2, 1e-8, "variant" + layer);
    const at::Tensor plain = scores_of("expected_attention:vnorm=0", input_for(step, 36));
    expect_rows(plain, expected_attention(step, 4, 512, true, false, 0.0), 4, 1e-8, "vnorm=0" + layer);
  }
}

// LagKV's partition scores: min–max normalised by the next partition per channel, sample std over channels,
// softmax within the partition, keys and values averaged; ranks / lag without cross.
TEST(PressScorers, LagKVScoresEachPartitionAgainstTheNext) {
  const int64_t sinks = 4, lag = 16;
  // Also a step whose keys are 0 in one rotation pair of dimensions: those channels are constant after RoPE.
  std::vector<LayerStep> cases = steps(kS);
  LayerStep constant_channel = cases[1];
  constant_channel.keys = constant_channel.keys.clone();
  constant_channel.keys.select(2, 0).zero_();
  constant_channel.keys.select(2, model().config().head_dim / 2).zero_();
  cases.push_back(constant_channel);
  for (const bool cross : {false, true}) {
    for (const LayerStep& step : cases) {
      const std::string what = "layer " + std::to_string(step.layer) + (cross ? " cross" : "");
      const at::Tensor got = scores_of("lagkv:sinks=4,lag=16,cross=" + std::to_string(cross), input_for(step, 36));
      const int64_t parts = (kS - sinks) / lag,
                    end = sinks + parts * lag;  // 4 partitions; the 4th with the rest is kept
      const auto keys = hand_rotated_keys(step), values = rows_of(step.values);
      std::vector<std::vector<double>> expect(keys.size());
      for (size_t h = 0; h < keys.size(); ++h) {
        for (int64_t p = 0; p + 1 < parts; ++p) {
          std::vector<double> part(static_cast<size_t>(lag), 0.0);
          for (const auto* x : {&keys[h], &values[h]}) {
            std::vector<double> stds;
            const size_t d = (*x)[0].size();
            for (int64_t i = 0; i < lag; ++i) {
              std::vector<double> z;
              for (size_t c = 0; c < d; ++c) {
                double lo = 1e300, hi = -1e300;
                for (int64_t j = 0; j < lag; ++j) {
                  const double ref = (*x)[static_cast<size_t>(sinks + (p + 1) * lag + j)][c];
                  lo = std::min(lo, ref), hi = std::max(hi, ref);
                }
                // A channel constant over the reference (zero range) counts as 0.
                z.push_back(hi > lo ? ((*x)[static_cast<size_t>(sinks + p * lag + i)][c] - lo) / (hi - lo) : 0.0);
              }
              double m = 0, ss = 0;
              for (double v : z) m += v / static_cast<double>(d);
              for (double v : z) ss += (v - m) * (v - m);
              stds.push_back(std::sqrt(ss / static_cast<double>(d - 1)));
            }
            softmax_in_place(stds);
            for (int64_t i = 0; i < lag; ++i) part[static_cast<size_t>(i)] += stds[static_cast<size_t>(i)] / 2;
          }
          if (!cross) {
            std::vector<double> rank(part.size());
            for (size_t i = 0; i < part.size(); ++i) {
              int below = 0;
              for (double v : part) below += v < part[i];
              rank[i] = below / static_cast<double>(lag);
            }
            part = rank;
          }
          expect[h].insert(expect[h].end(), part.begin(), part.end());
        }
      }
      ASSERT_TRUE(at::isfinite(got).all().item<bool>()) << what;
      expect_protected(got, 0, sinks, what);
      expect_protected(got, end - lag, kS, what);
      expect_rows(got, expect, sinks, 1e-9, what);
    }
  }
  // A prompt shorter than sinks + 2 · lag: the sinks, then recency.
  const at::Tensor short_prompt = scores_of("lagkv:lag=64", input_for(steps(kS)[0], 36));
  EXPECT_TRUE(at::equal(
      std::get<0>(std::get<1>(short_prompt.topk(36, 1)).sort(1)),
      at::cat({at::arange(4, at::kLong), at::arange(kS - 32, kS, at::kLong)}).expand({short_prompt.size(0), 36})));
}

// diag(X (XᵀX + λI)⁻¹ Xᵀ) of the centred keys before RoPE, per KV head.
std::vector<std::vector<double>> leverage(const std::vector<Matrix>& keys, double ridge) {
  std::vector<std::vector<double>> out;
  for (const Matrix& k : keys) {
    const size_t s = k.size(), d = k[0].size();
    std::vector<double> mean(d, 0.0);
    for (const auto& x : k)
      for (size_t c = 0; c < d; ++c) mean[c] += x[c] / static_cast<double>(s);
    Matrix x(s, std::vector<double>(d));
    for (size_t i = 0; i < s; ++i)
      for (size_t c = 0; c < d; ++c) x[i][c] = k[i][c] - mean[c];
    Matrix gram(d, std::vector<double>(d, 0.0));
    for (size_t a = 0; a < d; ++a) {
      gram[a][a] += ridge;
      for (size_t b = 0; b < d; ++b)
        for (size_t i = 0; i < s; ++i) gram[a][b] += x[i][a] * x[i][b];
    }
    std::vector<double> r;
    for (size_t i = 0; i < s; ++i) r.push_back(std::max(0.0, dot(x[i], solve(gram, x[i]))));
    out.push_back(r);
  }
  return out;
}

TEST(PressScorers, LeverageIsTheRidgeHatMatrixDiagonalZScored) {
  for (const LayerStep& step : steps(kS)) {
    const at::Tensor got = scores_of("leverage", input_for(step, 36));
    expect_rows(got, zscored(leverage(rows_of(step.keys), 0.01)), 0, 1e-7, "layer " + std::to_string(step.layer));
    // Without the ridge, the diagonal of the projection onto the centred keys' span: it sums to its rank.
    const at::Tensor exact = key_leverage(step.keys, 0.0).sum(1);
    EXPECT_TRUE(at::allclose(exact, at::full_like(exact, static_cast<double>(model().config().head_dim)), 0, 1e-6));
  }
}

// Per chunk, every query attends to every key of the chunk: softmax(q·k) over the chunk, summed over its
// queries, mean over each KV head's query heads, times ‖v‖, pooled over 3 (zero padding); not z-scored.
std::vector<std::vector<double>> non_causal(const Matrix* unused, const LayerStep& step, int64_t from, int64_t to,
                                            int64_t chunk) {
  (void)unused;
  const auto keys = hand_rotated_keys(step), queries = rows_of(step.queries), values = rows_of(step.values);
  const size_t heads = queries.size(), kv = keys.size(), group = heads / kv, n = static_cast<size_t>(to - from);
  std::vector<std::vector<double>> received(kv, std::vector<double>(n, 0.0));
  for (size_t h = 0; h < heads; ++h) {
    for (size_t a = 0; a < n; a += static_cast<size_t>(chunk)) {
      const size_t b = std::min(n, a + static_cast<size_t>(chunk));
      for (size_t i = a; i < b; ++i) {
        std::vector<double> p;
        for (size_t j = a; j < b; ++j)
          p.push_back(dot(queries[h][static_cast<size_t>(from) + i], keys[h / group][static_cast<size_t>(from) + j]));
        softmax_in_place(p);
        for (size_t j = a; j < b; ++j) received[h / group][j] += p[j - a] / static_cast<double>(group);
      }
    }
  }
  std::vector<std::vector<double>> out(kv, std::vector<double>(n, 0.0));
  for (size_t h = 0; h < kv; ++h) {
    std::vector<double> weighted(n);
    for (size_t j = 0; j < n; ++j) weighted[j] = received[h][j] * norm(values[h][static_cast<size_t>(from) + j]);
    for (size_t j = 0; j < n; ++j)
      out[h][j] = ((j > 0 ? weighted[j - 1] : 0.0) + weighted[j] + (j + 1 < n ? weighted[j + 1] : 0.0)) / 3;
  }
  return out;
}

TEST(PressScorers, NonCausalAttentionSumsEachChunksOwnAttention) {
  for (const LayerStep& step : steps(kS)) {
    for (const int64_t chunk : {16, 30, 256}) {  // 30: a shorter last chunk
      const at::Tensor got = scores_of("non_causal_attention:chunk=" + std::to_string(chunk), input_for(step, 36));
      expect_rows(got, zscored(non_causal(nullptr, step, 0, kS, chunk)), 0, 1e-8,
                  "layer " + std::to_string(step.layer) + " chunk " + std::to_string(chunk));
    }
  }
}

TEST(PressScorers, CompactorBlendsLeverageAndNonCausalAttentionBetweenItsEnds) {
  for (const LayerStep& step : steps(kS)) {
    const int64_t left = 8, right = 4, n = kS - left - right;
    std::vector<Matrix> middle_keys;
    for (const Matrix& k : rows_of(step.keys)) middle_keys.emplace_back(k.begin() + left, k.end() - right);
    const auto lev = zscored(leverage(middle_keys, 0.01));
    const auto att = zscored(non_causal(nullptr, step, left, kS - right, 16));
    for (const double blend : {0.25, 0.7}) {
      const at::Tensor got =
          scores_of("compactor:chunk=16", input_for(step, static_cast<int64_t>(kS * (1 - blend))), blend);
      std::vector<std::vector<double>> expect = att;
      for (size_t h = 0; h < expect.size(); ++h)
        for (int64_t j = 0; j < n; ++j) expect[h][static_cast<size_t>(j)] += blend * lev[h][static_cast<size_t>(j)];
      expect_protected(got, 0, left, "sinks");
      expect_protected(got, kS - right, kS, "recent");
      expect_rows(got, expect, left, 1e-7, "layer " + std::to_string(step.layer));
    }
    // blend=: overrides the ratio.
    const at::Tensor explicit_blend = scores_of("compactor:chunk=16,blend=0.7", input_for(step, 36), 0.1);
    const at::Tensor from_ratio = scores_of("compactor:chunk=16", input_for(step, 36), 0.7);
    EXPECT_TRUE(at::allclose(explicit_blend, from_ratio, 1e-12, 0));
  }
}

TEST(PressScorers, CurIsTheNormalisedProductOfLocalSquaredNormShares) {
  for (const LayerStep& step : steps(kS)) {
    for (const std::string& type : {"kv_product", "kv_avg", "key", "value"}) {
      const at::Tensor got = scores_of("cur:window=16,leverage=" + type, input_for(step, 36));
      const auto keys = rows_of(step.keys), values = rows_of(step.values);
      std::vector<std::vector<double>> expect;
      for (size_t h = 0; h < keys.size(); ++h) {
        const auto shares = [&](const Matrix& x) {
          std::vector<double> sq, out;
          for (const auto& r : x) sq.push_back(dot(r, r));
          for (size_t a = 0; a < sq.size(); a += 16) {
            double sum = 0;
            for (size_t i = a; i < std::min(sq.size(), a + 16); ++i) sum += sq[i];
            for (size_t i = a; i < std::min(sq.size(), a + 16); ++i) out.push_back(sq[i] / sum);
          }
          return out;
        };
        const auto k2 = shares(keys[h]), v2 = shares(values[h]);
        std::vector<double> s;
        double total = 0;
        for (size_t i = 0; i < k2.size(); ++i) {
          const double x = type == "kv_product" ? k2[i] * v2[i]
                           : type == "kv_avg"   ? (k2[i] + v2[i]) / 2
                           : type == "key"      ? k2[i]
                                                : v2[i];
          s.push_back(x);
          total += x;
        }
        for (double& x : s) x /= total;
        expect.emplace_back(s.begin() + 4, s.end());
      }
      expect_protected(got, 0, 4, "sinks");
      expect_rows(got, expect, 4, 1e-10, type + " layer " + std::to_string(step.layer));
    }
  }
}

// CriticalKV: ‖W_o,h v‖₁ through each query head's columns of the output projection, averaged over each KV
// head's query heads; the base's top ⌊first_stage · budget⌋ kept outright, the rest (base + ε) · norm.
TEST(PressScorers, CriticalKVRescalesByProjectedValueNormsAfterItsFirstStage) {
  const ModelConfig& c = model().config();
  for (const LayerStep& step : steps(kS)) {
    const int64_t budget = 30;
    const ScoreInput in = input_for(step, budget);
    const at::Tensor base = scores_of("knorm", in);
    const at::Tensor got = scores_of("criticalkv:base=knorm,epsilon=0.001,first_stage=0.4", in);
    const at::Tensor w_tensor = step.output_projection->dense().to(at::kDouble).contiguous();  // [hidden, H·d]
    const auto w = w_tensor.accessor<double, 2>();
    const auto values = rows_of(step.values);
    const int64_t group = c.num_heads / c.num_kv_heads, d = c.head_dim;
    for (int64_t h = 0; h < c.num_kv_heads; ++h) {
      const at::Tensor first = std::get<1>(base[h].topk(12));  // ⌊0.4 · 30⌋
      for (int64_t j = 0; j < kS; ++j) {
        double projected = 0;
        for (int64_t q = h * group; q < (h + 1) * group; ++q) {
          double l1 = 0;
          for (int64_t o = 0; o < c.hidden_size; ++o) {
            double y = 0;
            for (int64_t e = 0; e < d; ++e)
              y += w[o][q * d + e] * values[static_cast<size_t>(h)][static_cast<size_t>(j)][static_cast<size_t>(e)];
            l1 += std::abs(y);
          }
          projected += l1 / static_cast<double>(group);
        }
        const bool stage_one = (first == j).any().item<bool>();
        if (stage_one) {
          EXPECT_GE(got[h][j].item<double>(), kProtected) << "head " << h << " entry " << j;
        } else {
          EXPECT_NEAR(got[h][j].item<double>(), (base[h][j].item<double>() + 0.001) * projected, 1e-9 * projected)
              << "head " << h << " entry " << j;
        }
      }
    }
  }
}

TEST(PressScorers, CapIsAlignmentWeightedCapacityLeverage) {
  const double tau = 5.0, eps = 1e-6;
  for (const LayerStep& step : steps(kS)) {
    const at::Tensor got = scores_of("cap", input_for(step, 36));
    const auto keys = hand_rotated_keys(step), queries = hand_prerope_queries(step), values = rows_of(step.values);
    const size_t heads = queries.size(), kv = keys.size(), group = heads / kv, d = keys[0][0].size(), sinks = 4;
    // R̄: the mean rotation over the 512 positions after the prompt, applied to each query then averaged.
    std::vector<std::vector<double>> expect(kv, std::vector<double>(kS - sinks, 0.0));
    for (size_t h = 0; h < heads; ++h) {
      std::vector<double> anchor(d, 0.0);
      for (size_t t = sinks; t < static_cast<size_t>(kS); ++t) {
        std::vector<double> acc(d, 0.0);
        for (int64_t p = kS; p < kS + 512; ++p) {
          const auto r = rotate(queries[h][t], p);
          for (size_t c2 = 0; c2 < d; ++c2) acc[c2] += r[c2] / 512.0;
        }
        for (size_t c2 = 0; c2 < d; ++c2) anchor[c2] += acc[c2] / static_cast<double>(kS - sinks);
      }
      std::vector<double> align;
      double mx = -1e300;
      for (size_t j = sinks; j < static_cast<size_t>(kS); ++j) {
        const auto& k = keys[h / group][j];
        align.push_back(std::clamp(dot(k, anchor) / (norm(k) * norm(anchor)), -1.0, 1.0));
        mx = std::max(mx, tau * align.back());
      }
      Matrix a(d, std::vector<double>(d, 0.0));
      for (size_t c2 = 0; c2 < d; ++c2) a[c2][c2] = 1;
      std::vector<double> w;
      for (size_t j = 0; j < align.size(); ++j) {
        w.push_back(std::exp(tau * align[j] - mx));
        const auto& v = values[h / group][j + sinks];
        for (size_t x = 0; x < d; ++x)
          for (size_t y = 0; y < d; ++y) a[x][y] += (w[j] + eps) * v[x] * v[y];
      }
      for (size_t j = 0; j < align.size(); ++j) {
        const auto& v = values[h / group][j + sinks];
        expect[h / group][j] += w[j] * dot(v, solve(a, v)) / static_cast<double>(group);
      }
    }
    expect_protected(got, 0, 4, "sinks");
    expect_rows(got, expect, 4, 1e-8, "layer " + std::to_string(step.layer));
  }
}

// The filter by power iteration on the stacked rotated queries of each KV head's query heads, turned toward
// them; the score is the key's projection on it.
TEST(PressScorers, QFilterProjectsKeysOnTheQueriesDominantDirection) {
  for (const LayerStep& step : steps(kS)) {
    const at::Tensor got = scores_of("qfilter", input_for(step, 36));
    const auto keys = hand_rotated_keys(step), queries = rows_of(step.queries);
    const size_t kv = keys.size(), group = queries.size() / kv, d = keys[0][0].size();
    std::vector<std::vector<double>> expect;
    for (size_t h = 0; h < kv; ++h) {
      Matrix gram(d, std::vector<double>(d, 0.0));
      std::vector<double> sum(d, 0.0);
      for (size_t q = h * group; q < (h + 1) * group; ++q)
        for (const auto& x : queries[q])
          for (size_t a = 0; a < d; ++a) {
            sum[a] += x[a];
            for (size_t b = 0; b < d; ++b) gram[a][b] += x[a] * x[b];
          }
      std::vector<double> u(d, 1.0);
      for (int it = 0; it < 5000; ++it) {
        std::vector<double> next(d, 0.0);
        for (size_t a = 0; a < d; ++a)
          for (size_t b = 0; b < d; ++b) next[a] += gram[a][b] * u[b];
        const double n = norm(next);
        for (size_t a = 0; a < d; ++a) u[a] = next[a] / n;
      }
      if (dot(u, sum) < 0)
        for (double& x : u) x = -x;
      std::vector<double> r;
      for (const auto& k : keys[h]) r.push_back(dot(k, u));
      expect.push_back(r);
    }
    expect_rows(got, expect, 0, 1e-6, "layer " + std::to_string(step.layer));
  }
}

// ChunkPress: each chunk scored alone by the base (KeyDiff on the chunk's own keys) keeps its top share of
// the budget, shares by chunk length with the largest remainders rounded up.
TEST(PressScorers, ChunkKeepsEachChunksOwnTopShare) {
  const int64_t size = 16, budget = 31;  // chunks of 16, 16, 16, 16 and 8 tokens
  for (const LayerStep& step : steps(kS)) {
    const at::Tensor got = scores_of("chunk:base=keydiff,size=16", input_for(step, budget));
    const auto keys = hand_rotated_keys(step);
    for (size_t h = 0; h < keys.size(); ++h) {
      std::set<int64_t> expect;
      // Largest remainder: 31 · 16/72 = 6.89 (x4), 31 · 8/72 = 3.44 -> floors 6, 6, 6, 6, 3 (27); the four
      // largest remainders take the other 4.
      const std::vector<int64_t> share{7, 7, 7, 7, 3};
      for (int64_t c = 0; c * size < kS; ++c) {
        const int64_t a = c * size, len = std::min(size, kS - a);
        std::vector<double> anchor(keys[h][0].size(), 0.0);
        for (int64_t i = a; i < a + len; ++i)
          for (size_t d = 0; d < anchor.size(); ++d)
            anchor[d] +=
                keys[h][static_cast<size_t>(i)][d] / norm(keys[h][static_cast<size_t>(i)]) / static_cast<double>(len);
        std::vector<std::pair<double, int64_t>> scored;
        for (int64_t i = a; i < a + len; ++i) {
          const auto& k = keys[h][static_cast<size_t>(i)];
          scored.emplace_back(-dot(k, anchor) / (norm(k) * norm(anchor)), i);
        }
        std::sort(scored.rbegin(), scored.rend());
        for (int64_t j = 0; j < share[static_cast<size_t>(c)]; ++j)
          expect.insert(scored[static_cast<size_t>(j)].second);
      }
      std::set<int64_t> kept;
      for (int64_t i = 0; i < kS; ++i)
        if (got[static_cast<int64_t>(h)][i].item<double>() > 0) kept.insert(i);
      EXPECT_EQ(kept, expect) << "layer " << step.layer << " head " << h;
    }
  }
}

// BlockPress: the first `budget` entries, then each block of 16 joins them and KeyDiff over that union (its
// own mean unit key) keeps the top `budget`.
TEST(PressScorers, BlockKeepsTheTopOfWhatIsHeldPlusEachBlock) {
  const int64_t size = 16, budget = 30;
  for (const LayerStep& step : steps(kS)) {
    const at::Tensor got = scores_of("block:base=keydiff,size=16", input_for(step, budget));
    const auto keys = hand_rotated_keys(step);
    for (size_t h = 0; h < keys.size(); ++h) {
      std::vector<int64_t> held;
      for (int64_t i = 0; i < budget; ++i) held.push_back(i);
      for (int64_t a = budget; a < kS; a += size) {
        std::vector<int64_t> candidates = held;
        for (int64_t i = a; i < std::min(kS, a + size); ++i) candidates.push_back(i);
        std::vector<double> anchor(keys[h][0].size(), 0.0);
        for (int64_t i : candidates)
          for (size_t d = 0; d < anchor.size(); ++d)
            anchor[d] += keys[h][static_cast<size_t>(i)][d] / norm(keys[h][static_cast<size_t>(i)]) /
                         static_cast<double>(candidates.size());
        std::vector<std::pair<double, int64_t>> scored;
        for (int64_t i : candidates) {
          const auto& k = keys[h][static_cast<size_t>(i)];
          scored.emplace_back(-dot(k, anchor) / (norm(k) * norm(anchor)), i);
        }
        std::sort(scored.rbegin(), scored.rend());
        held.clear();
        for (int64_t j = 0; j < budget; ++j) held.push_back(scored[static_cast<size_t>(j)].second);
      }
      std::set<int64_t> kept, expect(held.begin(), held.end());
      for (int64_t i = 0; i < kS; ++i)
        if (got[static_cast<int64_t>(h)][i].item<double>() > 0) kept.insert(i);
      EXPECT_EQ(kept, expect) << "layer " << step.layer << " head " << h;
    }
  }
}

// The scorers that rotate keys need the layer's RoPE, which a step built by hand lacks: one line naming
// the press.
TEST(PressScorers, AStepWithoutTheModelsPartsIsAOneLineError) {
  LayerStep bare = steps(kS)[0];
  bare.rope = nullptr;
  bare.output_projection = nullptr;
  for (const std::string& name : {"keydiff", "expected_attention", "lagkv", "non_causal_attention", "compactor", "cap",
                                  "qfilter", "criticalkv:base=knorm"}) {
    try {
      scores_of(name, input_for(bare, 36));
      ADD_FAILURE() << name << " scored a step without its RoPE";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("--press "), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace kvc
