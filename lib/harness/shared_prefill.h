#pragma once
// One prefill serving many compression methods. While a prompt is prefilled, every layer attends over
// the whole prompt: a press compresses a layer's cache only after that layer's attention, so the hidden
// states, the keys and values each layer caches, and the prompt's last logits are the same whatever the
// method. A sample is therefore prefilled once into an uncompressed cache, keeping each layer's step and
// the attention statistics every method asks for (the union of their probes, from the same fused pass);
// then each method gets a copy of the filled cache and its observer replays the prefill layer by layer,
// seeing exactly what it would have seen in a run of its own, before the method's question pass
// (query-agnostic) and decoding.
//
// Setups whose compression changes the prefill itself run alone (run_sample): a storage layout of their
// own that is not named shared (retrieval), the full-precision reference, a run that dumps what it kept,
// or a model off the CPU (the GPU's causal kernel without statistics is not the blocked path with them,
// so outputs would differ in the last bits). A typed dense cache (a sweep's typed row) attends over its
// rounded entries, so it shares a prefill only with setups of its types; likewise a low-rank cache, whose
// layers attend over their reconstructed keys and values, only with the presses storing their entries in
// the same low-rank cache (CacheSetup::shared_prefill_layout). A press that scores the prompt with tokens
// fed after it (ForwardObserver::scoring_tokens: KVzip's reconstruction, KVCompose's repeated prompt)
// shares a prefill only with setups scoring the same tokens — one pass for KVzip at every ratio.
#include <functional>
#include <optional>
#include <vector>

#include "harness/sample_runner.h"

namespace kvc {

// Whether `setup` can take its prompt from a shared prefill on `model` (see above).
bool shares_prefill(const CacheSetup& setup, const LlamaModel& model);

class PrefillRecorder;

// Groups the setups `indices` names (each passing shares_prefill) by the element types of their dense
// cache, their shared layout and the tokens they score a prefill of `tokens` with, in the order the groups
// first appear: one shared prefill of `tokens` serves each group.
std::vector<std::vector<size_t>> prefill_groups(const std::vector<const CacheSetup*>& setups,
                                                const std::vector<size_t>& indices, const LlamaModel& model,
                                                const std::vector<int>& tokens);

// The prefill of `tokens` into an uncompressed cache of the setups' types and layout, recorded for
// `setups` (each must pass shares_prefill, all with the same dense cache types, shared layout and scoring
// tokens; they are not owned and must outlive it).
class SharedPrefill {
 public:
  // `stop`, when given, is asked between the prefill's layers: true ends it with InterruptedError.
  SharedPrefill(const LlamaModel& model, const std::vector<const CacheSetup*>& setups, const std::vector<int>& tokens,
                const std::function<bool()>& stop = {});
  ~SharedPrefill();
  SharedPrefill(const SharedPrefill&) = delete;
  SharedPrefill& operator=(const SharedPrefill&) = delete;

  // The prompt's last logits [1, vocab], as every setup's own prefill returns them.
  const at::Tensor& logits() const { return logits_; }

  struct Replay {
    KVCache cache;
    std::unique_ptr<ForwardObserver> observer;  // null for a setup without one
  };
  // Setup i's cache and observer as its own prefill of the tokens would have left them (once per setup).
  Replay replay(size_t i);

 private:
  std::vector<std::unique_ptr<ForwardObserver>> observers_;
  std::unique_ptr<PrefillRecorder> recorder_;
  std::unique_ptr<KVCache> filled_;
  at::Tensor logits_;
  int64_t tokens_ = 0, layers_ = 0;
};

struct SharedPrefillCost {
  int64_t prefills = 0;        // prompts prefilled (one per sample, plus one per setup that runs alone)
  int64_t shared_outputs = 0;  // outputs that took their prompt from a shared prefill
  double prefill_seconds = 0;  // spent prefilling shared prompts
  double replay_seconds = 0;   // copying the cache and replaying compression, all setups
  double decode_seconds = 0;   // question passes and decoding of shared setups
  double alone_seconds = 0;    // setups that ran alone (whole samples)
  SharedPrefillCost& operator+=(const SharedPrefillCost& o);
};

// How many setups sharing a prefill decode in lockstep by default (LlamaModel::forward_lockstep). Each holds
// its compressed cache until its batch is done (16 uncompressed caches of 4,096 tokens: 0.6 GB for Gemma 3
// 270M in float32, 1.5 GB for SmolLM2 in f16), and a sweep stopped meanwhile runs the batch again.
constexpr int64_t kDefaultLockstepSetups = 16;

// The outputs run_sample would give for each of `setups` (in order; equal tokens, predictions and cache
// bytes), with one prefill for all setups that share it. An output's `seconds` counts its own replay,
// question pass and decoding, not the shared prefill; `cost`, when given, receives where the time went.
// `stop`, when given, is asked before each setup's run, before each shared prefill and between its layers: once
// it answers true the setups not yet run are left without an output (nullopt), so a sweep stops between cells,
// not samples, and within a prefill of minutes.
// The setups of one prefill decode `lockstep` at a time in lockstep (the outputs do not depend on it).
std::vector<std::optional<SampleOutput>> run_sample_shared(
    const LlamaModel& model, const Tokenizer& tokenizer, const std::vector<const CacheSetup*>& setups,
    const PromptTokens& prompt, QueryMode mode, const DecodeOptions& decode, SharedPrefillCost* cost = nullptr,
    const std::function<bool()>& stop = {}, int64_t lockstep = kDefaultLockstepSetups);

}  // namespace kvc
