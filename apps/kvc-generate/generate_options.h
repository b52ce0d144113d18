#pragma once
// kvc-generate's options, shared by the single-prompt run (main.cpp) and the conversation mode (chat.cpp).
#include <string>

#include "compression_options.h"
#include "generation/sampler.h"
#include "model_options.h"

namespace kvc::generate_app {

struct GenerateOptions {
  cli::ModelOptions model;
  cli::CompressionOptions compression;
  std::string prompt, prompt_file, json_out;
  bool json = false;
  bool count_ops = false;
  int64_t max_new_tokens = 128;
  int64_t ctx_size = 0;       // > 0: limit on prompt + generated tokens
  int64_t prompt_tokens = 0;  // > 0: exactly this many prompt tokens (benchmarks at a fixed context)
  SamplingParams sampling;
  bool ignore_eos = false, quiet = false;
  bool escape = false;  // -e: backslash sequences in -p, as llama.cpp
  // Conversation mode (--chat): the prompt is one user turn, or each line of stdin is one.
  bool chat = false;
  std::string system, chat_template;
};

}  // namespace kvc::generate_app
