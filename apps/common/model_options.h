#pragma once
// Options every model-running tool shares: --model, --threads, --device, --dtype.
#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>

#include <memory>
#include <string>

#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::cli {

struct ModelOptions {
  std::string model_dir;
  int threads = 0;
  std::string device = "cpu";
  std::string dtype = "auto";

  void add_to(CLI::App& app) {
    app.add_option("-m,--model", model_dir, "Hugging Face model folder (config.json, *.safetensors, tokenizer.model)");
    app.add_option("-t,--threads", threads, "CPU threads (default: all cores)");
    app.add_option("--device", device, "cpu or cuda")->capture_default_str();
    app.add_option("--dtype", dtype, "auto, float32, float16 or bfloat16 (CUDA only)")->capture_default_str();
  }

  std::shared_ptr<LlamaModel> load_model() const {
    KVC_CHECK(!model_dir.empty(), "--model is required (a Hugging Face model folder)");
    at::set_num_threads(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    return LlamaModel::load(model_dir, LoadOptions{device, dtype});
  }

  Tokenizer load_tokenizer() const {
    const std::string path = model_dir + "/tokenizer.model";
    KVC_CHECK(file_exists(path), "'{}' has no tokenizer.model (SentencePiece); copy one next to config.json",
              model_dir);
    return Tokenizer::load(path);
  }
};

}  // namespace kvc::cli
