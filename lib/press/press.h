#pragma once
// The press framework (kvpress style): a method is a *scorer* (importance of each cached entry, per
// layer × KV head) + a *selector* (keep the top entries under a budget; protected entries — sinks,
// recent window — carry scores above kProtected so they always win) + an *allocator* (allocator.h:
// how the total budget is split across layers or heads, and what happens to evicted entries, e.g.
// D2O's merge). PressObserver runs them inside the forward pass: at prefill (the first forward call
// of a sequence) it compresses each layer, and for bounded methods it evicts on every later call once
// a layer is over its budget.
#include <ATen/ATen.h>

#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "model/forward_observer.h"
#include "press/allocator.h"
#include "press/press_registry.h"
#include "util/error.h"

namespace kvc {

// Scores at or above this mark protected entries (sinks, window); ties among them go to the higher.
constexpr double kProtected = 1e12;

enum class HeadAgg { Mean, Max };

// What a scorer sees. At prefill, the layer's cache holds exactly the prompt (storage order = prompt
// order); during decoding, the observer's tracked positions/cumulative scores mirror storage order.
struct ScoreInput {
  int64_t layer = 0;
  bool prefill = true;
  const LayerStep* step = nullptr;  // keys pre-RoPE [n_kv, T, d], stats as probe() asked
  at::Tensor positions;             // [n_kv, S] int64 of the cached entries
  at::Tensor cumulative;            // [n_kv, S] float64 Σ attention received so far (if tracked)
  at::Tensor current;               // [n_kv, S] float64 attention of the newest query (if tracked)
  // [n_kv, S] float64 Σ over queries of the square of each query's attention, averaged over the KV head's
  // query heads before squaring (if tracked: PressConfig::squared)
  at::Tensor cumulative_squares;
  int64_t budget = 0;  // entries this layer will keep per head
  int64_t num_heads = 0, num_kv_heads = 0;
  HeadAgg agg = HeadAgg::Mean;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // What the scorer needs from prefill attention (prompt_len is unknown here; window is clamped).
  virtual AttentionProbe probe() const { return {}; }
  // Importance [n_kv, S] float64, higher = keep; protected entries >= kProtected.
  virtual at::Tensor score(const ScoreInput& in) const = 0;
};

struct PressConfig {
  std::string name;
  std::shared_ptr<const Scorer> scorer;
  AllocatorFactory allocator;  // empty: every layer and head the same budget
  bool bounded = false;        // evict during decoding too (H2O, TOVA, StreamingLLM, D2O)
  bool cumulative = false;     // track Σ attention per entry across calls (H2O, D2O)
  bool current = false;        // track the newest query's attention (TOVA)
  bool squared = false;        // track Σ (attention)² per entry across calls, from every query's row (RoCo)
  HeadAgg agg = HeadAgg::Mean;
  bool shared_heads = false;  // one selection per layer for all heads (identical retain rows)
  // The allocator runs at every prefill, with or without --ratio/--budget: the method decides what it keeps
  // by its own parameters (registered with sizes_itself).
  bool sizes_itself = false;
  // Tokens fed after the prompt only to score it (ForwardObserver::scoring_tokens); empty: none.
  std::function<std::vector<int>(const std::vector<int>& prompt)> scoring_tokens;
  // Completes the config with what only the loaded model gives (its tokenizer, to encode a press's own
  // text); make_setup calls it once. Empty: nothing to bind.
  std::function<void(PressConfig&, const LlamaModel&)> bind_model;
  // Compression while decoding every `interval` passes (kvpress' DecodingPress; press/decoding.cpp): each
  // layer's whole cache is scored by the scorer, with the attention of the last `window` decoded queries,
  // and cut to `target` entries per KV head, or with `fraction` > 0 to floor(tokens seen × (1 − fraction)).
  struct DecodingSchedule {
    int64_t interval = 0;  // 0: no compression while decoding (but a bounded press's per-step eviction)
    int64_t target = 0;
    double fraction = 0;
    int64_t window = 1;  // decoded queries the scorer's attention statistics are taken over
    // CaM (press/cam_merge.h): evicted values merged into the next `merge_window` kept entries; 0: none.
    int64_t merge_window = 0;
    uint64_t seed = 0;
  };
  DecodingSchedule decoding;
  double ratio = 0;
  int64_t budget = 0;

  std::unique_ptr<Allocator> new_allocator() const { return allocator ? allocator() : std::make_unique<Allocator>(); }
};

// Aggregates per-query-head scores [n_heads, ...] onto KV heads [n_kv, ...].
at::Tensor aggregate_heads(const at::Tensor& per_query_head, int64_t num_kv_heads, HeadAgg agg);
// Writes (or with `accumulate` adds) aggregate_heads(per_query_head [n_heads, >= S]) into `into`
// [n_kv, S] float64: one pass on the CPU, for the bookkeeping of every decode step.
void aggregate_heads_into(const at::Tensor& per_query_head, HeadAgg agg, const at::Tensor& into, bool accumulate);
// 1-D average pooling along the last dim with an odd kernel ("same" length); the edges average over
// the entries that exist, or over zero padding with zero_padding.
at::Tensor pool1d(const at::Tensor& scores, int64_t kernel, bool zero_padding = false);
// Copy of importance [n_kv, S] with the `sinks` oldest and the `recent` newest entries of each head
// protected: by `positions` [n_kv, S] when given (a bounded cache evicting in place is not in
// chronological storage order), else by storage order.
at::Tensor protect_ends(const at::Tensor& importance, int64_t sinks, int64_t recent, const at::Tensor& positions = {});
// Integer split of `total` proportional to `weights`, each within [lo, hi], summing exactly to total
// when feasible (largest remainder, clamps redistributed).
std::vector<int64_t> distribute(const std::vector<double>& weights, int64_t total, const std::vector<int64_t>& lo,
                                const std::vector<int64_t>& hi);
// A prompt of `length` entries cut into chunks of `chunk` (the last one shorter): how many of `budget` kept
// entries each chunk keeps, split by the chunks' lengths (distribute; at most a chunk's length each).
std::vector<int64_t> chunk_budgets(int64_t length, int64_t chunk, int64_t budget);
// The index of each row's least entry of scores [n, S], as scores.argmin(1) gives it (the first minimum;
// a NaN counts as the least); one pass per row on the CPU, where argmin's reduction costs more than that.
at::Tensor row_argmin(const at::Tensor& scores);
// Indices (sorted ascending, storage order) of the top `keep` entries per row of scores [n, S].
at::Tensor top_indices(const at::Tensor& scores, int64_t keep);

// Scorers that read the model's own parts beyond attention statistics (scorer_inputs.cpp); each fails in
// one line naming the press where the step lacks what it needs.
// The step's keys rotated as the cache holds them [n_kv, T, d] (the layer's RoPE at the step's positions).
at::Tensor rotated_keys(const ScoreInput& in, const std::string& press);
// The step's queries before RoPE [n_heads, T, d] (as attention scales them).
at::Tensor prerope_queries(const ScoreInput& in, const std::string& press);
// Standard score over every entry of every head: (x − mean) / max(std, 1e-6), std with Bessel's correction
// (kvpress' normalisation of the scores Compactor blends).
at::Tensor zscore(const at::Tensor& x);
// `text` in the model's own tokenizer (no BOS/EOS), for a press that feeds text of its own (KVzip's repeat
// prompt); a one-line error naming the press where the model has no tokenizer.
std::vector<int> encode_with_model_tokenizer(const LlamaModel& model, const std::string& text,
                                             const std::string& press);
// A 0|1 parameter (default `fallback`).
bool get_flag(const PressParams& p, const std::string& key, bool fallback);

// Parses the parameters every press accepts (agg=mean|max, heads=shared|per) into config.
void parse_common(const PressParams& p, PressConfig& config);
// Per-layer shares from a kvc-profile file for params.ratio; refuses files made for another model.
std::vector<double> load_layer_shares(const std::string& path, double ratio, const LlamaModel& model);

// The CacheSetup for a configured press (an observer per sequence; bounded when it evicts while decoding).
CacheSetup make_setup(PressConfig config, const PressParams& p, const LlamaModel& model);

// A method file registers a builder (params -> config); wrappers (ada) build their base through it.
using ConfigBuilder = std::function<PressConfig(const PressParams&)>;
// sizes_itself: the method keeps what its own parameters say, without --ratio or --budget (PressEntry);
// needs_file: it runs only with a file made for the model (PressEntry); sizing_key: the parameter it sizes itself
// by where a spec without it takes --ratio or --budget (PressEntry).
void register_method(const std::string& name, const std::string& description, ConfigBuilder build,
                     bool sizes_itself = false, bool needs_file = false, const std::string& sizing_key = "");
PressConfig build_method_config(const PressParams& p);
// A wrapper's base press: the parameters `wrapper` was given, named by its base= (else `fallback`), less base=
// and the wrapper's own keys (the rest, ratio and budget pass to the base). Refuses the wrapper as its own base.
PressParams base_press_params(const PressParams& wrapper, const std::string& fallback,
                              std::initializer_list<const char*> own_keys);

// Shared scorers other presses reuse (SnapKV's window attention; H2O's cumulative attention).
// SnapKV's pooling of the window votes: kernel, edge padding, and whether the window's columns are pooled.
struct SnapKVPooling {
  int64_t kernel = 5;
  bool zero_padding = false;
  bool window_pooled = true;
};
// Built from the press's kernel=, pad=, pool= parameters (snapkv_keys() lists them with window=).
std::shared_ptr<const Scorer> make_snapkv_scorer(int64_t window, const PressParams& p);
std::vector<std::string> snapkv_keys();

}  // namespace kvc
