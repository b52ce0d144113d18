// kvc-make-checkpoint: a random-weight checkpoint of any Llama shape, for benchmarks and tests.
#include <ATen/Parallel.h>

#include <cstdio>

#include "flag_vocabulary.h"
#include "model/random_checkpoint.h"
#include "tool_main.h"

int main(int argc, char** argv) {
  constexpr const char* kTool = "kvc-make-checkpoint";
  CLI::App app{
      "Write a random-weight Llama checkpoint (config.json and model.safetensors; tokenizer.model only with "
      "--tokenizer).",
      kTool};
  app.footer(R"(
The presets are full-size (llama-125m: about 540 MB; tinyllama-1.1b: 4.4 GB in float32).
Without --tokenizer the folder has no tokenizer: kvc-bench needs none (it feeds token ids); the tools that
read text need one, copied in with --tokenizer (the third example).

Examples:
  kvc-make-checkpoint --hidden 256 --layers 4 --heads 8 --kv-heads 2 --vocab 2048 --out-dir out/small
  kvc-make-checkpoint --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 1024 --model-type qwen2 --dtype bfloat16 --max-shard-mb 1 --out-dir out/qwen2-small
  kvc-make-checkpoint --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 2048 --tokenizer data/models/kvc-micro-lm/tokenizer.model --out-dir out/with-tokenizer
)");
  std::string preset, out;
  kvc::CheckpointShape shape;
  kvc::RandomCheckpointOptions options;
  double max_shard_mb = 0;
  app.add_option("--preset", preset, "llama-125m, tinyllama-1.1b or llama2-7b-1layer (flags below override)");
  kvc::cli::add_out_dir(app, out, "Folder to write")->required();
  auto* hidden = app.add_option("--hidden", shape.hidden_size, "hidden_size");
  auto* inter = app.add_option("--intermediate", shape.intermediate_size, "intermediate_size");
  auto* layers = app.add_option("--layers", shape.num_layers, "num_hidden_layers");
  auto* heads = app.add_option("--heads", shape.num_heads, "num_attention_heads");
  auto* kv_heads = app.add_option("--kv-heads", shape.num_kv_heads, "num_key_value_heads");
  auto* head_dim = app.add_option("--head-dim", shape.head_dim, "head_dim");
  auto* vocab = app.add_option("--vocab", shape.vocab_size, "vocab_size");
  auto* context = app.add_option("--context", shape.max_position_embeddings, "max_position_embeddings");
  auto* dtype = app.add_option("--dtype", shape.dtype, "float32, float16 or bfloat16");
  auto* arch = app.add_option("--model-type", shape.model_type, "llama, mistral or qwen2");
  app.add_option("--seed", options.seed, "Weight seed")->capture_default_str();
  app.add_option("--init-std", options.init_std, "Weight standard deviation")->capture_default_str();
  app.add_option("--max-shard-mb", max_shard_mb, "Split into shards of at most this many MB (0 = one file)");
  app.add_option("--tokenizer", options.tokenizer_path, "tokenizer.model to copy in (e.g. the Llama-2 one)");
  // Old spellings of the output folder: -o/--output.
  const kvc::cli::AliasList old_names = {{"-o", "--out-dir"}, {"--output", "--out-dir"}};
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool, old_names); code >= 0) return code;
  return kvc::cli::run_tool(kTool, [&] {
    at::set_num_threads(kvc::cli::default_threads());
    kvc::CheckpointShape s = preset.empty() ? shape : kvc::checkpoint_preset(preset);
    // Explicit flags win over the preset.
    if (*hidden) s.hidden_size = shape.hidden_size;
    if (*inter) s.intermediate_size = shape.intermediate_size;
    if (*layers) s.num_layers = shape.num_layers;
    if (*heads) s.num_heads = shape.num_heads;
    if (*kv_heads) s.num_kv_heads = shape.num_kv_heads;
    if (*head_dim) s.head_dim = shape.head_dim;
    if (*vocab) s.vocab_size = shape.vocab_size;
    if (*context) s.max_position_embeddings = shape.max_position_embeddings;
    if (*dtype) s.dtype = shape.dtype;
    if (*arch) s.model_type = shape.model_type;
    kvc::validate_checkpoint_shape(s);
    options.max_shard_bytes = static_cast<int64_t>(max_shard_mb * 1e6);
    kvc::write_random_checkpoint(s, out, options);
    std::fprintf(stderr, "%s: wrote %s (%.1fM parameters, %s)\n", kTool, out.c_str(),
                 static_cast<double>(kvc::parameter_count(s)) / 1e6, s.dtype.c_str());
    return 0;
  });
}
