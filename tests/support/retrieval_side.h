#pragma once
// A model's cache on a retrieval store of its own, for tests that run the same tokens through two
// retrieval settings and compare them; and the arbitrary tokens they feed (any tokens do: outputs are
// compared, not judged).
#include <memory>
#include <string>
#include <vector>

#include "model/llama_model.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/run_command.h"

namespace kvc::test {

struct RetrievalSide {
  std::shared_ptr<retrieval::RetrievalShared> shared;
  std::unique_ptr<KVCache> cache;
};

// `measure`: keep every entry in RAM too, so the shared state records attention recall.
inline RetrievalSide make_retrieval_side(const LlamaModel& model, const std::string& spec, bool measure = true) {
  const ModelConfig& mc = model.config();
  RetrievalSide s;
  s.shared =
      retrieval::make_retrieval_shared(retrieval::RetrievalConfig::parse(spec), retrieval::RecordFormat{mc.head_dim},
                                       make_temp_dir("kvc-retrieval-side") + "/store.kvs", measure);
  s.cache = std::make_unique<KVCache>(
      model.new_cache(retrieval::retrieval_layer_factory(mc.attention_shape(), model.rope(), s.shared)));
  return s;
}

// BOS, then tokens from a 64-bit LCG seeded with `seed`, never the first three ids (special tokens).
inline std::vector<int> lcg_tokens(const LlamaModel& model, size_t count, uint64_t seed) {
  std::vector<int> tokens{model.config().bos_token_id};
  uint64_t x = seed;
  while (tokens.size() < count) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    tokens.push_back(3 + static_cast<int>((x >> 33) % (model.config().vocab_size - 3)));
  }
  return tokens;
}

}  // namespace kvc::test
