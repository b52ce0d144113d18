#pragma once
// A deliberately naive Llama forward pass in float64 scalar loops, written from the Hugging Face
// modelling code's equations and sharing nothing with lib/model: the brute-force expectation that
// architecture variants (GQA, Qwen2 biases, Mistral windows, RoPE scaling) are checked against.
#include <string>
#include <vector>

namespace kvc::test {

// Logits [T][vocab] for `tokens` at positions 0..T-1, reading config.json and model.safetensors.
std::vector<std::vector<double>> naive_llama_logits(const std::string& model_dir, const std::vector<int>& tokens);

}  // namespace kvc::test
