// kvc-train inspect: what the low-rank cache keeps for a text (per token, per layer, K and V) and
// how fast it decodes relative to the full cache in the same process.
#include "inspect.h"

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "flag_vocabulary.h"
#include "generation/decode_loop.h"
#include "lowrank/lowrank_layer_cache.h"
#include "lowrank/lowrank_setup.h"
#include "model_options.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::train_app {
namespace {

// Greedy decoding of `n` tokens after `prompt`; returns decode tokens per second.
double decode_rate(const LlamaModel& model, KVCache cache, const std::vector<int>& prompt, int64_t n) {
  at::NoGradGuard no_grad;
  ForwardOptions last;
  last.all_logits = false;
  const at::Tensor logits = model.forward(prompt, cache, last);
  DecodeLimits limits;
  limits.max_new_tokens = n + 1;  // the first token comes from the prompt's logits: n forward passes
  limits.stop_at_eos = false;
  int64_t kept = 0;
  const auto t0 = std::chrono::steady_clock::now();
  run_decode_loop(
      model, cache, logits, limits, last,
      [](const at::Tensor& l) { return static_cast<int>(l.argmax(-1).item<int64_t>()); },
      [&](int) {
        ++kept;
        return std::string();
      });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(kept - 1) / seconds;  // forward passes per second (the context may stop it early)
}

}  // namespace

void add_inspect_command(CLI::App& app, std::function<int()>& action) {
  struct Options {
    cli::ModelOptions model;
    std::string lowrank, text, text_file, tsv;
    int64_t rank = 0, bench = 0, repeats = 3;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "Per-token ranks of a text; decode throughput vs the full cache");
  cmd->footer(R"(
Examples:
  kvc-train inspect -m data/models/stories260K --lowrank gates.safetensors --text "Once upon a time" --tsv ranks.tsv
  kvc-train inspect -m data/models/stories260K --lowrank bases.safetensors --rank 8 --text "Once upon a time" --bench 50 --json
)");
  o->model.add_to(*cmd);
  o->model.add_bos_flags_to(*cmd);
  cmd->add_option("--lowrank", o->lowrank, "gates.safetensors, or bases.safetensors with --rank")->required();
  cmd->add_option("--rank", o->rank, "Fixed rank with a bases file");
  cmd->add_option("--text", o->text, "Text to inspect");
  cli::add_text_file(*cmd, o->text_file, "Or: a file with the text");
  cmd->add_option("--tsv", o->tsv, "Write token, layer, key rank, value rank rows here (for gnuplot)");
  cmd->add_option("--bench", o->bench, "Also time this many greedy decode steps, full vs low-rank cache");
  cmd->add_option("--repeats", o->repeats, "Alternating timing repeats (best of)")->capture_default_str();
  cli::add_json_switch(*cmd, o->json);
  cmd->callback([o, &action] {
    action = [o] {
      KVC_CHECK(o->text.empty() != o->text_file.empty(), "give exactly one of --text and -f/--file");
      auto model = o->model.load_model();
      const Tokenizer tok = o->model.load_tokenizer();
      const std::string text = o->text.empty() ? read_text_file(o->text_file) : o->text;
      const std::vector<int> ids = tok.encode_prompt(text, o->model.bos);
      std::vector<lowrank::LowRankLayerCache*> lowrank_layers;
      const LayerCacheFactory factory = recording_layers(
          lowrank::make_lowrank_factory(lowrank::parse_lowrank_spec(o->lowrank, o->rank), *model), &lowrank_layers);
      KVCache cache = model->new_cache(factory);
      {
        at::NoGradGuard no_grad;
        model->forward(ids, cache);
      }
      const auto L = static_cast<int64_t>(lowrank_layers.size());
      const int64_t d = model->config().kv_dim();
      nlohmann::json tokens = nlohmann::json::array(), layers = nlohmann::json::array();
      std::vector<at::Tensor> kr, vr;
      for (int64_t l = 0; l < L; ++l) {
        const auto& lc = *lowrank_layers[static_cast<size_t>(l)];
        kr.push_back(lc.key_ranks());
        vr.push_back(lc.value_ranks());
        layers.push_back({{"layer", l}, {"retain_rate", lc.retain_rate()}});
      }
      std::ostringstream tsv;  // written at the end through the file writer ('-' = stdout)
      if (!o->tsv.empty()) {
        tsv << "# token_index\tlayer\tkey_rank\tvalue_rank\tpiece (d_kv = " << d << ")\n";
      }
      for (size_t t = 0; t < ids.size(); ++t) {
        std::vector<int64_t> k, v;
        for (int64_t l = 0; l < L; ++l) {
          k.push_back(kr[l][t].item<int64_t>());
          v.push_back(vr[l][t].item<int64_t>());
          if (!o->tsv.empty())
            tsv << t << '\t' << l << '\t' << k.back() << '\t' << v.back() << '\t' << tok.piece(ids[t]) << '\n';
        }
        tokens.push_back({{"piece", tok.piece(ids[t])}, {"key_ranks", k}, {"value_ranks", v}});
      }
      if (!o->tsv.empty()) write_file_atomic(o->tsv, tsv.str());
      const CacheFootprint f = cache.footprint();
      KVCache dense = model->new_cache();
      {
        at::NoGradGuard no_grad;
        model->forward(ids, dense);
      }
      nlohmann::json out = {
          {"lowrank", o->lowrank},
          {"d_kv", d},
          {"tokens", tokens},
          {"layers", layers},
          {"payload_bytes", f.payload_bytes},
          {"resident_bytes", f.resident_bytes},
          {"dense_payload_bytes", dense.footprint().payload_bytes},
          {"memory_fraction", static_cast<double>(f.payload_bytes) / dense.footprint().payload_bytes}};
      if (o->bench > 0) {
        KVC_CHECK(static_cast<int64_t>(ids.size()) + o->bench < model->config().max_position_embeddings,
                  "--bench: prompt + {} tokens exceeds the model's context", o->bench);
        double full = 0, low = 0;
        for (int64_t r = 0; r < o->repeats; ++r) {  // alternate so both see the same machine state
          full = std::max(full, decode_rate(*model, model->new_cache(), ids, o->bench));
          low = std::max(low, decode_rate(*model, model->new_cache(factory), ids, o->bench));
        }
        out["decode_tokens_per_second_full"] = full;
        out["decode_tokens_per_second_lowrank"] = low;
        out["decode_relative"] = low / full;
      }
      if (o->json) {
        std::printf("%s\n", out.dump().c_str());
        return 0;
      }
      for (size_t t = 0; t < ids.size(); ++t) {
        std::printf("%-14s K", tokens[t]["piece"].get<std::string>().c_str());
        for (auto r : tokens[t]["key_ranks"]) std::printf(" %3lld", static_cast<long long>(r.get<int64_t>()));
        std::printf("  V");
        for (auto r : tokens[t]["value_ranks"]) std::printf(" %3lld", static_cast<long long>(r.get<int64_t>()));
        std::printf("\n");
      }
      std::printf("memory fraction %.4f (payload %lld of %lld bytes)\n", out["memory_fraction"].get<double>(),
                  static_cast<long long>(f.payload_bytes),
                  static_cast<long long>(out["dense_payload_bytes"].get<int64_t>()));
      if (o->bench > 0) {
        std::printf("decode: full %.1f tok/s, low-rank %.1f tok/s (%.1f%%)\n",
                    out["decode_tokens_per_second_full"].get<double>(),
                    out["decode_tokens_per_second_lowrank"].get<double>(), 100 * out["decode_relative"].get<double>());
      }
      return 0;
    };
  });
}

}  // namespace kvc::train_app
