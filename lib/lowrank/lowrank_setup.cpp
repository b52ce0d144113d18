#include "lowrank/lowrank_setup.h"

#include <sstream>

#include "lowrank/grouped_basis.h"
#include "lowrank/lowrank_artifacts.h"
#include "lowrank/lowrank_layer_cache.h"
#include "lowrank/rank_search.h"
#include "util/checked_number.h"
#include "util/error.h"
#include "util/spec_parser.h"

namespace kvc::lowrank {
namespace {

int64_t parse_int(const std::string& s, const std::string& what) {
  if (const auto v = parse_integer(s)) return *v;
  fail("--lowrank: {} must be an integer, got '{}'", what, s);
}

// `stored`: the basis coefficients are kept in, when it is not p's own (rotated keys).
std::shared_ptr<RankedProjection> to_device(const Projection& p, const AttentionShape& shape,
                                            const at::TensorOptions& o, int64_t rank, double tau, bool half_gate,
                                            const Projection* stored = nullptr) {
  auto r = std::make_shared<RankedProjection>();
  const at::Tensor& U = stored != nullptr ? stored->U : p.U;
  // Inverse in float64: a trained U is no longer orthogonal, and its inverse must be accurate.
  r->U_inv_heads = at::linalg_inv(U.to(at::kDouble))
                       .view({U.size(0), shape.num_kv_heads, shape.head_dim})
                       .permute({1, 0, 2})
                       .contiguous()
                       .to(o);
  // A fixed rank keeps only the leading coefficients: projecting onto the others would be discarded work.
  r->U = (rank > 0 ? U.narrow(1, 0, rank) : U).contiguous().to(o);
  r->rotated = stored != nullptr;
  if (rank == 0 && p.has_gate()) {
    // The gate reads p.U's coefficients (also for rotated keys, whose stored basis is another):
    // folded onto the state, it decides each token's ranks before the token is projected.
    r->W = fold_gate(p.U, p.W);
    // A 16-bit gate: its values rounded to f16 on every device, so ranks do not depend on where the cache
    // lives; the CPU's row-streaming product below then also reads it in f16, half the gate's bytes.
    if (half_gate) {
      r->W = r->W.to(at::kHalf);
      KVC_CHECK(at::isfinite(r->W).all().item<bool>(),
                "--lowrank: gate=f16: the gate's matrix holds values beyond "
                "f16's range (largest magnitude {}); use gate=f32",
                fold_gate(p.U, p.W).abs().max().item<double>());
    }
    r->W = r->W.to(o);
    r->b = p.b.to(o);
    r->gate_reads_state = true;
  }
  if (o.device().is_cpu() && o.dtype() == at::kFloat) {
    // One form per matrix: transposed for the row-streaming products.
    for (auto [plain, rows] :
         {std::pair{&r->U, &r->U_rows}, std::pair{&r->gate_U, &r->gate_U_rows}, std::pair{&r->W, &r->W_rows}}) {
      if (plain->defined()) *rows = plain->t().contiguous();
      *plain = at::Tensor();
    }
    if (half_gate && r->W_rows.defined()) r->W_rows = r->W_rows.to(at::kHalf);
  }
  r->fixed_rank = rank;
  r->tau = tau;
  return r;
}

// Palu's bases from the model's own projection weights: per layer, the SVD of each group's rows of W_k
// and W_v. A key normalised per head after its projection (Gemma 3's k_norm) is not linear in the
// weights, so their SVD does not describe it.
Artifact palu_artifact(const LlamaModel& model, int64_t group_size) {
  const ModelConfig& c = model.config();
  Artifact a;
  a.path = LowRankSpec::kPaluPath;
  a.kind = kBasesKind;
  const int64_t q = c.num_heads * c.head_dim, kv = c.kv_dim();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = model.layer_weights(l);
    KVC_CHECK(!w.k_norm.defined(),
              "--lowrank palu: layer {} normalises its keys after the projection (k_norm), so "
              "the weights' SVD does not describe them; use a bases file from kvc-calibrate with group=",
              l);
    const at::Tensor rows = at::arange(q, q + 2 * kv, at::TensorOptions().dtype(at::kLong));
    const at::Tensor kv_rows =
        (w.qkv.is_blocks() ? w.qkv.lookup_rows(rows) : w.qkv.dense().index_select(0, rows)).to(at::kCPU, at::kDouble);
    LayerBasis basis;
    basis.key = grouped_from_weight(kv_rows.narrow(0, 0, kv), c.num_kv_heads, group_size);
    basis.value = grouped_from_weight(kv_rows.narrow(0, kv, kv), c.num_kv_heads, group_size);
    a.layers.push_back(basis);
  }
  return a;
}

}  // namespace

std::vector<int64_t> lowrank_layers(const ModelConfig& config) {
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < config.num_layers; ++l)
    if (!config.is_local_layer(l)) layers.push_back(l);
  return layers;
}

LowRankSpec parse_lowrank_spec(const std::string& text, int64_t rank) {
  LowRankSpec spec;
  spec.path = text;
  // The path may itself hold ':'; parameters follow the last ':' when it is followed by key=value
  // items (or by nothing, which is an error rather than a file name ending in ':').
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos &&
      (text.find('=', colon) != std::string::npos || text.find_first_not_of(" \t", colon + 1) == std::string::npos)) {
    spec.path = text.substr(0, colon);
    const SpecValues values(parse_spec_params(text.substr(colon + 1), "--lowrank", text), "--lowrank", text);
    values.check_known_keys({"tau", "ranks", "share", "keys", "gate", "group"});
    const std::string keys = values.get_string("keys", "pre-rope");
    KVC_CHECK(keys == "pre-rope" || keys == "rotated",
              "--lowrank: keys must be pre-rope (the default: keys stored "
              "before RoPE and rotated when read) or rotated (stored after RoPE, scored in the latent), got '{}'",
              keys);
    spec.rotated_keys = keys == "rotated";
    const std::string gate = values.get_string("gate", "f32");
    KVC_CHECK(gate == "f32" || gate == "f16",
              "--lowrank: gate must be f32 (the default) or f16 (the gate's "
              "matrix rounded to 16 bits: half its bytes per decode step), got '{}'",
              gate);
    spec.half_gate = gate == "f16";
    if (values.has("share")) {
      spec.share = values.get_number("share", 0.0);
      KVC_CHECK(spec.share > 0 && spec.share <= 1,
                "--lowrank: share must be in (0, 1] (the kept share of the cache), "
                "got {}",
                spec.share);
    }
    if (values.has("tau")) {
      spec.tau = values.get_number("tau", spec.tau);
      KVC_CHECK(spec.tau > 0 && spec.tau < 1, "--lowrank: tau must be in (0, 1), got {}", spec.tau);
    }
    if (values.has("group")) {
      spec.group = static_cast<int64_t>(values.get_number("group", 0.0));
      KVC_CHECK(spec.group >= 1 && static_cast<double>(spec.group) == values.get_number("group", 0.0),
                "--lowrank: group must be a whole number of KV heads >= 1, got {}", values.get_string("group", ""));
    }
    std::stringstream rs(values.get_string("ranks", ""));
    std::string r;
    while (std::getline(rs, r, '/')) spec.ranks.push_back(parse_int(r, "each of ranks=a/b/..."));
  }
  KVC_CHECK(rank >= 0, "--rank must be >= 0, got {}", rank);
  KVC_CHECK(rank == 0 || spec.ranks.empty(), "--lowrank: give either --rank or ':ranks=', not both");
  KVC_CHECK(spec.share == 0 || (rank == 0 && spec.ranks.empty()),
            "--lowrank: share= searches the ranks itself; give it without --rank or ':ranks='");
  if (rank > 0) spec.ranks = {rank};
  if (spec.from_weights()) {
    KVC_CHECK(!spec.rotated_keys,
              "--lowrank palu: the weights' SVD describes keys before RoPE; keys=rotated needs "
              "a bases file from kvc-calibrate (with group=)");
    KVC_CHECK(spec.share == 0 && spec.tau < 0 && !spec.half_gate,
              "--lowrank palu: give a fixed rank (--rank r or "
              "':ranks='); share=, tau= and gate= need a bases or gates file");
  }
  KVC_CHECK(spec.group == 0 || spec.share == 0,
            "--lowrank: group= and share= do not combine (the search reads one "
            "basis's eigenvalues in order); give the fixed rank with --rank r or ':ranks='");
  return spec;
}

LayoutFactory<LowRankLayerCache> make_lowrank_factory(const LowRankSpec& spec, const LlamaModel& model) {
  const ModelConfig& c = model.config();
  // palu's default group is every KV head: Palu's J-LRD, the variant the token-wise low-rank paper compares
  // against (its §4.1).
  const int64_t group = spec.group > 0 ? spec.group : spec.from_weights() ? c.num_kv_heads : 0;
  Artifact a = spec.from_weights() ? palu_artifact(model, group) : load_artifact(spec.path, c);
  if (group > 0) {
    KVC_CHECK(!a.is_gates(), "--lowrank: group= applies to a bases file or palu, and '{}' holds trained gates",
              spec.path);
    for (LayerBasis& layer : a.layers) {
      if (!spec.from_weights()) {
        layer.key = grouped_from_moment(layer.key, c.num_kv_heads, group);
        layer.value = grouped_from_moment(layer.value, c.num_kv_heads, group);
      }
      if (spec.rotated_keys && layer.rotated_key.U.defined())
        layer.rotated_key = grouped_from_moment(layer.rotated_key, c.num_kv_heads, group);
    }
  }
  KVC_CHECK(!spec.rotated_keys || a.has_rotated_keys(),
            "--lowrank: '{}' holds no basis of rotated keys; run "
            "kvc-calibrate again (and kvc-train on its output) to write one for keys=rotated",
            spec.path);
  const int64_t L = c.num_layers, dkv = c.kv_dim();
  std::vector<int64_t> ranks(static_cast<size_t>(L), 0), value_ranks;
  if (a.is_gates()) {
    KVC_CHECK(spec.ranks.empty() && spec.share == 0,
              "--rank: '{}' holds trained gates (adaptive rank); a fixed rank "
              "needs a bases file from kvc-calibrate",
              spec.path);
  } else if (spec.half_gate) {
    fail("--lowrank: gate=f16 applies to trained gates, and '{}' is a bases file (fixed ranks have no gate)",
         spec.path);
  } else if (spec.share > 0) {
    KVC_CHECK(spec.tau < 0, "--lowrank: tau applies to gates, and '{}' is a bases file", spec.path);
    // Rotated keys are truncated in their own basis: its eigenvalues decide their ranks.
    Artifact searched = a;
    if (spec.rotated_keys) {
      for (LayerBasis& layer : searched.layers) layer.key = layer.rotated_key;
    }
    const RankAllocation allocation = search_ranks(searched, lowrank_layers(c), spec.share);
    ranks = allocation.keys;
    value_ranks = allocation.values;
  } else {
    KVC_CHECK(!spec.ranks.empty(),
              "--lowrank: '{}' is a bases file; give the fixed rank with --rank r (or "
              "'{}:ranks=r0/r1/...'), or pass gates from kvc-train",
              spec.path, spec.path);
    KVC_CHECK(spec.tau < 0, "--lowrank: tau applies to gates, and '{}' is a bases file", spec.path);
    KVC_CHECK(spec.ranks.size() == 1 || static_cast<int64_t>(spec.ranks.size()) == L,
              "--lowrank: ranks= lists {} values, the model has {} layers", spec.ranks.size(), L);
    for (int64_t l = 0; l < L; ++l) {
      ranks[l] = spec.ranks.size() == 1 ? spec.ranks[0] : spec.ranks[l];
      KVC_CHECK(ranks[l] >= 1 && ranks[l] <= dkv, "--rank: {} is outside 1..{} (d_kv = n_kv_heads * head_dim)",
                ranks[l], dkv);
    }
  }
  const double tau = spec.tau > 0 ? spec.tau : a.tau;
  const auto options = at::TensorOptions().dtype(model.dtype()).device(model.device());
  const AttentionShape shape = c.attention_shape();
  std::vector<std::shared_ptr<const RankedProjection>> keys, values;
  if (value_ranks.empty()) value_ranks = ranks;
  for (int64_t l = 0; l < L; ++l) {
    keys.push_back(to_device(a.layers[l].key, shape, options, ranks[l], tau, spec.half_gate,
                             spec.rotated_keys ? &a.layers[l].rotated_key : nullptr));
    values.push_back(to_device(a.layers[l].value, shape, options, value_ranks[l], tau, spec.half_gate));
  }
  auto rope = model.rope();
  const CacheTypes stored = model.cache_types();
  return [=](int64_t layer) {
    return std::make_unique<LowRankLayerCache>(shape, rope, options, keys[layer], values[layer], stored);
  };
}

}  // namespace kvc::lowrank
