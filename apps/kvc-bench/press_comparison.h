#pragma once
// kvc-bench --presses: decode speed of eviction methods against the uncompressed cache, step by step in
// turn in one process (generation/interleaved_decode.h).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "model/llama_model.h"

namespace kvc::bench {

// Prints a table to `table` and returns the JSON of the comparison: each press at `ratio` (the first
// entry is the reference, usually "none"), `steps` decode steps after the same `prompt`.
nlohmann::json compare_presses(const LlamaModel& model, const std::vector<std::string>& presses, double ratio,
                               const std::vector<int>& prompt, int64_t steps, FILE* table);

}  // namespace kvc::bench
