#pragma once
// llama.cpp's flags that kvc does not take, each with the reason and what to use instead. A user who
// knows llama-cli types them; CLI11 would read "-ngl 99" as the short option -n with the value "gl"
// and report something unrelated, so parse_or_exit refuses them by name first. Flags kvc does take
// with llama.cpp's meaning are options or aliases of the tools themselves (-m, -p, -f, -n, -c, -t, -s,
// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, -ctk, -ctv; kvc-generate's -cnv, -sys).
#include <string>
#include <utility>
#include <vector>

namespace kvc::cli {

struct LlamaCppFlag {
  std::vector<std::string> names;
  std::string why;  // completes "llama.cpp flag 'X' is not supported by kvc: ..."
};

inline const std::vector<LlamaCppFlag>& unsupported_llama_cpp_flags() {
  static const std::vector<LlamaCppFlag> flags = {
      {{"-ngl", "--gpu-layers", "--n-gpu-layers"},
       "the whole model runs on one device; --device cuda puts every layer on the GPU"},
      {{"-fa", "--flash-attn"}, "kvc's CPU attention is always fused; there is nothing to switch"},
      {{"-b", "--batch-size", "-ub", "--ubatch-size"}, "a prompt is prefilled in one pass"},
      {{"-tb", "--threads-batch"}, "one thread count, -t, serves prefill and decode"},
      {{"-np", "--parallel", "-cb", "--cont-batching", "-nocb", "--no-cont-batching"},
       "kvc decodes one sequence at a time"},
      {{"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu", "-dev", "--device-draft"},
       "kvc uses one device; --device cpu|cuda picks it"},
      {{"-md", "--model-draft", "-ngld", "--gpu-layers-draft", "--draft-max", "--draft-min"},
       "kvc has no speculative decoding"},
      {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-mu", "--model-url", "-hft", "--hf-token"},
       "kvc never downloads; pass a local .gguf or model folder with -m"},
      {{"-i", "--interactive", "-if", "--interactive-first", "-ins", "--instruct"},
       "for a conversation use --chat (-cnv), which reads turns from standard input"},
      {{"-no-cnv", "--no-conversation"}, "kvc generates a plain completion unless --chat is given"},
      {{"-r", "--reverse-prompt"}, "generation stops at the model's end-of-generation tokens and at -n"},
      {{"-nkvo", "--no-kv-offload", "-kvu", "--kv-unified"}, "the cache lives with the model on its device"},
      {{"--mlock", "--no-mmap", "-dio", "--direct-io"}, "weights are read from the file's mapping"},
      {{"-gan", "--grp-attn-n", "-gaw", "--grp-attn-w", "--rope-scale", "--rope-freq-base", "--rope-freq-scale",
        "--yarn-orig-ctx", "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast"},
       "positions follow the model's own RoPE settings (config.json or the GGUF metadata)"},
      {{"-ot", "--override-tensor", "-cmoe", "--cpu-moe", "-ncmoe", "--n-cpu-moe"},
       "kvc places whole models; it has no mixture-of-experts models"},
      {{"--grammar", "--grammar-file", "-j", "--json-schema", "-jf", "--json-schema-file"},
       "kvc does not constrain sampling by a grammar"},
      {{"-lcs", "--lookup-cache-static", "-lcd", "--lookup-cache-dynamic"}, "kvc has no lookup decoding"},
      {{"-co", "--color", "-sp", "--special", "-lv", "--verbosity", "--log-file", "--log-disable"},
       "kvc prints text on stdout and one-line diagnostics on stderr; --json gives the ids and statistics"},
      {{"--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled"}, "kvc loads no adapters"},
      {{"--mirostat", "--mirostat-lr", "--mirostat-ent", "--typical", "--xtc-probability", "--xtc-threshold",
        "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n", "--samplers",
        "--sampling-seq", "--presence-penalty", "--frequency-penalty", "--ignore-eos-token", "--dynatemp-range"},
       "kvc samples with --temp, --top-k, --top-p, --min-p and --repeat-penalty (applied in llama.cpp's order)"},
  };
  return flags;
}

// The reason for a llama.cpp flag kvc does not take (the name before any "=value"), or nullptr.
inline const std::string* llama_cpp_flag_refusal(const std::string& token) {
  const std::string name = token.substr(0, token.rfind("--", 0) == 0 ? token.find('=') : std::string::npos);
  for (const LlamaCppFlag& flag : unsupported_llama_cpp_flags())
    for (const std::string& n : flag.names)
      if (n == name) return &flag.why;
  return nullptr;
}

}  // namespace kvc::cli
