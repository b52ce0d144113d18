#pragma once
// What most press tests run on: stories260K in float64 (its attention always takes the generic path that
// also records statistics, so runs with and without a press compare bit for bit), a TinyStories prompt, and
// a prefill through a compression.
#include <string>
#include <vector>

#include "compression/compression_spec.h"
#include "model/llama_model.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"

namespace kvc::test {

inline const LlamaModel& stories260k_float64() {
  static auto m = [] {
    LoadOptions options;
    options.dtype = "float64";
    return LlamaModel::load(model_dir("stories260K"), options);
  }();
  return *m;
}

// The first n tokens (BOS first) of the TinyStories excerpt's first 6,000 characters (about 1,500 tokens).
inline std::vector<int> tinystories_prompt(int64_t n) {
  static const std::vector<int> ids = [] {
    const Tokenizer tok = Tokenizer::load(model_dir("stories260K") + "/tokenizer.model");
    return tok.encode_prompt(slurp(data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 6000));
  }();
  return std::vector<int>(ids.begin(), ids.begin() + n);
}

// The cache `setup` leaves after a prefill of `ids`.
inline KVCache prefill(const LlamaModel& model, const CacheSetup& setup, const std::vector<int>& ids) {
  KVCache cache = setup.new_cache(model);
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model.forward(ids, cache, o);
  return cache;
}

// The same for `press` at `ratio` ("none": the uncompressed cache).
inline KVCache prefill(const LlamaModel& model, const std::string& press, double ratio, const std::vector<int>& ids) {
  CompressionSpec spec;
  spec.press = press;
  spec.ratio = ratio;
  return prefill(model, build_cache_setup(spec, model), ids);
}

}  // namespace kvc::test
