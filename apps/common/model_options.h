#pragma once
// Options every model-running tool shares: --model, --threads, --device, --dtype.
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>

#include "io/gguf_reader.h"
#include "model/llama_model.h"
#include "runtime/thread_policy.h"
#include "tokenizer/tokenizer.h"
#include "util/checked_number.h"
#include "util/error.h"
#include "util/files.h"
#include "util/run_files.h"

namespace kvc::cli {

// What -m accepts: a Hugging Face model folder (config.json, *.safetensors, a tokenizer), a file inside
// one (its folder is used), or a .gguf file (read by the loader). Anything else gets one line saying
// what was given and how to fix it; a path that does not exist at all is left to the loader.
inline std::string resolve_model_path(const std::string& given) {
  namespace fs = std::filesystem;
  constexpr const char* kSupported =
      "kvc reads a Hugging Face Llama-family folder with config.json, *.safetensors "
      "and tokenizer.model or tokenizer.json, or a .gguf file";
  std::error_code ec;
  const fs::path path(given);
  if (fs::is_directory(path, ec)) {
    KVC_CHECK(fs::exists(path / "config.json", ec) || !fs::exists(path / "tokenizer.json", ec),
              "-m {}: the folder has tokenizer.json but no config.json; {}: add config.json and the weights "
              "(e.g. from the model's Hugging Face repository)",
              given, kSupported);
    return given;
  }
  if (fs::exists(path, ec)) {
    if (gguf::is_gguf_file(given)) return given;
    const std::string name = path.filename().string();
    const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
    const bool model_file = path.extension() == ".safetensors" || name == "config.json" || name == "tokenizer.model" ||
                            name == "tokenizer.json" || name == "model.safetensors.index.json";
    KVC_CHECK(model_file && fs::exists(folder / "config.json", ec),
              "-m {}: a file, not a model folder; {}: pass that folder", given, kSupported);
    return folder.string();
  }
  static const std::regex hub_id(R"([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)");
  KVC_CHECK(!std::regex_match(given, hub_id),
            "-m {}: no such folder; it looks like a Hugging Face id, but models are not downloaded: {}, so "
            "download it (e.g. huggingface-cli download {} --local-dir models/NAME) and pass -m models/NAME",
            given, kSupported, given);
  return given;
}

struct ModelOptions {
  std::string model_dir;
  int threads = 0;
  std::string device = "cpu";
  std::string dtype = "auto";
  std::string cache_type_k = "auto", cache_type_v = "auto";

  void add_to(CLI::App& app) {
    app.add_option("-m,--model", model_dir,
                   "Hugging Face model folder (config.json, *.safetensors, tokenizer.model) or .gguf file")
        ->transform([](const std::string& given) {
          const std::string model = resolve_model_path(given);
          note_model_files(model);  // no output of the run may land on the model's files
          return model;
        });
    app.add_option("-t,--threads", threads, "CPU threads (default: the cores not busy with other processes)")
        ->check([](const std::string& given) {
          const auto count = parse_integer(given);  // not a number: CLI11's conversion reports it
          if (!count) return std::string();
          return check_thread_count(static_cast<int>(std::clamp<int64_t>(*count, INT_MIN, INT_MAX)));
        });
    app.add_option("--device", device, "cpu or cuda")->capture_default_str();
    app.add_option("--dtype", dtype,
                   "Weights' precision in memory: auto (as stored; on the CPU a GGUF's quantized blocks stay in their "
                   "blocks, multiplied in place; on CUDA they become bfloat16), float32, float16 or bfloat16 (GGUF "
                   "blocks dequantized at load). On CPU activations stay float32")
        ->capture_default_str();
    const auto cache_type = [](const std::string& flag) {
      return [flag](const std::string& given) {
        parse_cache_type(given, flag);  // throws the one-line error
        return std::string();
      };
    };
    app.add_option("--cache-type-k", cache_type_k,
                   "Element type of the cached keys (-ctk): f32, f16, bf16, q8_0 or q4_0 (ggml's blocks of 32 values "
                   "with one scale; CPU, head_dim a multiple of 32) (auto: f16 for a GGUF whose weights stay in their "
                   "blocks, as "
                   "llama.cpp; else the activations' type, f32 on CPU)")
        ->check(cache_type("--cache-type-k"))
        ->capture_default_str();
    app.add_option("--cache-type-v", cache_type_v, "Element type of the cached values (-ctv), as --cache-type-k")
        ->check(cache_type("--cache-type-v"))
        ->capture_default_str();
  }

  std::shared_ptr<LlamaModel> load_model() const {
    KVC_CHECK(!model_dir.empty(), "--model is required (a Hugging Face model folder)");
    set_threads(threads);
    LoadOptions options{device, dtype};
    options.cache_types = {parse_cache_type(cache_type_k, "--cache-type-k"),
                           parse_cache_type(cache_type_v, "--cache-type-v")};
    return LlamaModel::load(model_dir, options);
  }

  // Whether prompts and evaluation streams start with BOS: by default the tokenizer file decides (GGUF's
  // add_bos_token, tokenizer_config.json's add_bos_token), as in llama.cpp and transformers.
  BosChoice bos = BosChoice::FromFile;

  // --bos / --no-bos, for the tools that tokenize text.
  void add_bos_flags_to(CLI::App& app) {
    auto* add = app.add_flag_callback(
        "--bos", [this] { bos = BosChoice::Add; },
        "Start every prompt with the BOS token, whatever the tokenizer file says");
    auto* omit = app.add_flag_callback(
        "--no-bos", [this] { bos = BosChoice::Omit; },
        "Start no prompt with the BOS token, whatever the tokenizer file says");
    add->excludes(omit);
  }

  // tokenizer.json (byte-level BPE) when the folder has one, else tokenizer.model (SentencePiece).
  Tokenizer load_tokenizer() const {
    KVC_CHECK(!model_dir.empty(), "--model is required (a Hugging Face model folder)");
    return Tokenizer::load(model_dir);
  }
};

}  // namespace kvc::cli
