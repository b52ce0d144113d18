// kvc-train: learn the token-wise rank gates of the low-rank KV cache (model frozen).
// Subcommand `inspect` shows per-token/per-layer ranks of a sentence and times decoding against the
// full cache (see inspect.cpp).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "flag_vocabulary.h"
#include "inspect.h"
#include "lowrank/gate_training.h"
#include "model_options.h"
#include "rank_options.h"
#include "tool_main.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/run_files.h"

namespace {

struct TrainCli {
  kvc::cli::ModelOptions model;
  std::string bases, output;
  std::vector<std::string> data;
  double heldout_share = 0.1;
  bool json = false;
  std::string loss = "ce";
  std::string target = "gates";
  bool lr_given = false;
  std::vector<std::string> given;  // the long names of the options on the command line
  kvc::lowrank::TrainOptions o;
  kvc::cli::RankOptions ranks;
};

void add_train_options(CLI::App& app, TrainCli& t) {
  t.model.add_to(app);
  t.model.add_bos_flags_to(app);
  app.add_option("--bases", t.bases, "PCA bases from kvc-calibrate (bases.safetensors)");
  kvc::cli::add_text_files(app, t.data, "Training text files; the last --heldout share is held out");
  kvc::cli::add_output_file(app, t.output, "Where to write gates.safetensors (bases with --target matryoshka)");
  app.add_option("--alpha", t.o.alpha, "Weight of R² in the loss (larger: smaller cache)")->capture_default_str();
  app.add_option("--loss", t.loss,
                 "ce: next-token cross-entropy (the paper's); kl: KL divergence from the exact model's next-token "
                 "distribution (distillation)")
      ->check(CLI::IsMember({"ce", "kl"}))
      ->capture_default_str();
  app.add_option("--target", t.target,
                 "gates: the token-wise rank gates and their basis (writes gates for --lowrank FILE:tau=...); "
                 "matryoshka: MatryoshkaKV-style orthogonal bases trained at ranks drawn from --matryoshka-shares, "
                 "no gates (writes bases for --lowrank FILE:ranks=R)")
      ->check(CLI::IsMember({"gates", "matryoshka"}))
      ->capture_default_str();
  app.add_option("--matryoshka-shares", t.o.nested_shares,
                 "--target matryoshka: the shares of d_kv each window cuts a layer's K and V at (one drawn per layer, "
                 "K/V and window)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--eval-share", t.o.eval_share, "--target matryoshka: the share the held-out evaluations cut at")
      ->capture_default_str();
  app.add_option("--tau", t.o.tau, "Hard-mask threshold used at inference")->capture_default_str();
  app.add_option("--steps", t.o.steps, "Optimizer steps")->capture_default_str();
  kvc::cli::add_ctx_size(app, t.o.seq_len, "Tokens per training window")->capture_default_str();
  app.add_option("--batch", t.o.batch, "Windows per step")->capture_default_str();
  app.add_option("--lr", t.o.lr,
                 "Peak learning rate (AdamW, warmup + cosine): 0.005 for the gates, 0.001 for --target matryoshka's "
                 "rotations");
  app.add_option("--basis-lr-scale", t.o.basis_lr_scale, "Learning rate of U relative to --lr")->capture_default_str();
  app.add_option("--weight-decay", t.o.weight_decay, "AdamW weight decay of the gates")->capture_default_str();
  app.add_option("--warmup", t.o.warmup, "Linear warmup steps")->capture_default_str();
  app.add_option("--clip", t.o.clip, "Max global gradient norm")->capture_default_str();
  app.add_option("--init-bias", t.o.init_bias, "Initial gate bias ramp (larger: start nearer full rank)")
      ->capture_default_str();
  app.add_option("--eval-every", t.o.eval_every, "Held-out CE and retain rate every N steps")->capture_default_str();
  app.add_option("--eval-windows", t.o.eval_windows, "Held-out windows per evaluation")->capture_default_str();
  app.add_option("--heldout", t.heldout_share, "Share of the data held out for evaluation")->capture_default_str();
  app.add_option("--seed", t.o.seed, "Seed of the training-window sequence")->capture_default_str();
  app.add_option("--checkpoint", t.o.checkpoint, "Checkpoint file (written atomically; with --resume, read)");
  app.add_option("--checkpoint-every", t.o.checkpoint_every, "Checkpoint every N steps")->capture_default_str();
  app.add_flag("--resume", t.o.resume, "Continue from --checkpoint (same flags required)");
  app.add_option("--stop-after", t.o.stop_after, "Stop at this step with a checkpoint, as an interruption would");
  kvc::cli::add_json_switch(app, t.json);
  t.ranks.add_to(app);
}

int run_train(TrainCli& t) {
  KVC_CHECK(!t.bases.empty(), "--bases is required (run kvc-calibrate first)");
  KVC_CHECK(!t.data.empty(), "-f/--file is required (training text)");
  KVC_CHECK(!t.output.empty() || t.o.stop_after > 0, "--output is required (where gates.safetensors goes)");
  KVC_CHECK(!(t.json && t.output == "-"), "-o - and --json would both write to stdout; give -o a file name");
  KVC_CHECK(t.heldout_share > 0 && t.heldout_share < 1, "--heldout must be in (0, 1), got {}", t.heldout_share);
  t.o.loss = t.loss == "kl" ? kvc::lowrank::TrainLoss::KlFromExact : kvc::lowrank::TrainLoss::CrossEntropy;
  t.o.target = t.target == "matryoshka" ? kvc::lowrank::TrainTarget::NestedBasis : kvc::lowrank::TrainTarget::Gates;
  // The rotations move every direction of a basis at once: the gates' rate overshoots them.
  if (t.o.target == kvc::lowrank::TrainTarget::NestedBasis && !t.lr_given) t.o.lr = 1e-3;
  t.o.validate();  // meaningless options and unwritable paths fail before the model loads
  // An option of the other target would be ignored without a word: refuse it instead.
  const bool nested = t.o.target == kvc::lowrank::TrainTarget::NestedBasis;
  const std::vector<std::string> gates_only = {"--alpha", "--tau", "--init-bias", "--basis-lr-scale", "--weight-decay"};
  const std::vector<std::string> nested_only = {"--matryoshka-shares", "--eval-share"};
  for (const std::string& name : t.given) {
    KVC_CHECK(!nested || std::find(gates_only.begin(), gates_only.end(), name) == gates_only.end(),
              "{} sets the gates' training; --target matryoshka trains no gates: leave {} out", name, name);
    KVC_CHECK(nested || std::find(nested_only.begin(), nested_only.end(), name) == nested_only.end(),
              "{} applies to --target matryoshka; add --target matryoshka or leave {} out", name, name);
  }
  const int world = kvc::rank_environment().world;  // checked before waiting for the other ranks
  KVC_CHECK(t.o.batch >= world,
            "--batch {} over {} ranks: each rank runs whole windows, so --batch must be at "
            "least the number of ranks",
            t.o.batch, world);
  const std::shared_ptr<kvc::Ranks> ranks = t.ranks.join();
  kvc::note_input_file(t.bases, "the --bases file");
  if (ranks->is_root() && !t.output.empty()) kvc::claim_writable_output(t.output);
  if (ranks->is_root() && !t.o.checkpoint.empty()) kvc::claim_writable_output(t.o.checkpoint);
  // Training differentiates through every projection: a GGUF's blocks are dequantized at load.
  if (t.model.dtype == "auto" && kvc::gguf::is_gguf_file(t.model.model_dir)) t.model.dtype = "float32";
  auto model = t.model.load_model();
  const auto bases = kvc::lowrank::load_artifact(t.bases, model->config(), "--bases");
  KVC_CHECK(!bases.is_gates(), "--bases: '{}' holds gates; pass the bases file from kvc-calibrate", t.bases);
  const kvc::Tokenizer tok = t.model.load_tokenizer();
  std::vector<int> ids;
  for (const auto& path : t.data) {
    KVC_CHECK(kvc::file_exists(path), "-f/--file: file not found: '{}'", path);
    const auto document = tok.encode_prompt(kvc::read_text_file(path), t.model.bos);
    ids.insert(ids.end(), document.begin(), document.end());
  }
  ranks->check_same("training data", kvc::hash_files(t.data));
  ranks->check_same("bases", kvc::hash_file(t.bases));
  const auto split = static_cast<size_t>(static_cast<double>(ids.size()) * (1.0 - t.heldout_share));
  const std::vector<int> train(ids.begin(), ids.begin() + split), heldout(ids.begin() + split, ids.end());
  t.o.show_progress = !t.json && ranks->is_root();
  const auto res = kvc::lowrank::train_gates(
      *model, bases, train, heldout, t.o,
      [&](const kvc::lowrank::EvalPoint& e) {
        if (!t.json && ranks->is_root()) {
          std::fprintf(stderr,
                       "\nstep %lld: loss %.4f | held-out CE %.4f (exact cache %.4f), KL %.4f, R soft %.3f, hard "
                       "%.3f | %.0f tok/s\n",
                       static_cast<long long>(e.step), e.train_loss, e.heldout_ce, e.heldout_ce_full, e.heldout_kl,
                       e.soft_retain, e.hard_retain, e.tokens_per_second);
        }
      },
      ranks.get());
  if (!ranks->is_root()) return 0;  // rank 0 writes the gates and the report
  // A resumed run's evaluations include those made before the interruption (kept in the checkpoint).
  nlohmann::json evals = nlohmann::json::array();
  for (const kvc::lowrank::EvalPoint& e : res.evals) {
    evals.push_back({{"step", e.step},
                     {"train_loss", e.train_loss},
                     {"heldout_ce", e.heldout_ce},
                     {"heldout_ce_exact_cache", e.heldout_ce_full},
                     {"heldout_kl", e.heldout_kl},
                     {"retain_soft", e.soft_retain},
                     {"retain_hard", e.hard_retain},
                     {"tokens_per_second", e.tokens_per_second}});
  }
  nlohmann::json out = {{"steps_done", res.steps_done},
                        {"finished", res.finished},
                        {"tokens", res.tokens_seen},
                        {"evals", evals},
                        {"checkpoint", t.o.checkpoint},
                        {"ranks", ranks->world()},
                        {"exchange_seconds", res.exchange_seconds}};
  if (res.finished && !t.output.empty()) {
    kvc::lowrank::Artifact gates = res.gates;
    gates.metadata["bases_hash"] = kvc::hash_file(t.bases);
    gates.metadata["data_hash"] = kvc::hash_files(t.data);
    kvc::lowrank::write_artifact(t.output, gates, model->config());
    out["output"] = t.output;
    out["final_ce"] = std::stod(gates.metadata["final_ce"]);
    out["final_kl"] = std::stod(gates.metadata["final_kl"]);
    out["final_retain_rate"] = std::stod(gates.metadata["final_retain_rate"]);
  }
  if (t.json) std::printf("%s\n", out.dump().c_str());
  else if (res.finished && t.output == "-")
    std::fprintf(stderr, "wrote %s to stdout after %lld steps\n", t.target == "gates" ? "gates" : "bases",
                 static_cast<long long>(res.steps_done));
  else if (res.finished)
    std::printf("wrote %s after %lld steps\n", t.output.c_str(), static_cast<long long>(res.steps_done));
  else
    std::printf("stopped at step %lld; continue with --resume --checkpoint %s\n",
                static_cast<long long>(res.steps_done), t.o.checkpoint.c_str());
  // Interrupted on any rank: every rank exits 130, so `torchrun ... && next` stops on each node.
  return res.interrupted ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kTool = "kvc-train";
  CLI::App app{"Train the token-wise rank gates of the low-rank KV cache (model weights frozen).", kTool};
  app.footer(R"(
Loss = cross-entropy (--loss ce) or KL divergence from the exact model (--loss kl) + alpha * R^2, R the
mean soft mask over dimensions, tokens, layers and K/V. On a model with sliding-window layers (Gemma 3)
only the global layers are gated, as the low-rank cache compresses only them.
--target matryoshka trains no gates: each layer's K and V basis is rotated (U = U_pca * Cayley(A), so it
stays orthogonal) to minimise the loss with every window cut at ranks drawn from --matryoshka-shares
(MatryoshkaKV's nested training; use --loss kl, its distillation). The output is a bases file: use it as
--lowrank FILE:ranks=R, or share=S (ranks chosen from the starting PCA eigenvalues). The gates' options
(--alpha, --tau, --init-bias, --basis-lr-scale, --weight-decay) are refused with it, and its own
(--matryoshka-shares, --eval-share) without it.
Training windows are a function of (--seed, step), so an interrupted run continued with --resume
(same flags) reaches the same gates as an uninterrupted one; the checkpoint keeps the held-out
evaluations made so far, so its --json report holds the whole curve. Ctrl-C stops at the next step
with a checkpoint.

Several processes share each step's batch (window b goes to rank b % ranks) and add up their
gradients over c10d (Gloo) before every update, so N ranks train the gates of one process with the
same --batch. Launched by torchrun or Slurm, they read their rank from its environment; rank 0 writes
the checkpoints, the gates and the report, and sends the checkpoint to the others on --resume. Ctrl-C
on any rank stops every rank after the same step with a checkpoint; a rank that dies ends the others
with one line naming the last checkpoint to resume from.

Examples:
  kvc-calibrate -m data/models/stories260K -f data/text/tinystories/tinystories_excerpt_30k.txt -o bases.safetensors
  kvc-train -m data/models/stories260K --bases bases.safetensors \
      -f data/text/tinystories/tinystories_excerpt_30k.txt --alpha 16 --steps 20 -c 128 \
      --checkpoint train.ckpt --stop-after 10
  kvc-train -m data/models/stories260K --bases bases.safetensors \
      -f data/text/tinystories/tinystories_excerpt_30k.txt --alpha 16 --steps 20 -c 128 \
      --checkpoint train.ckpt --resume -o gates.safetensors
  MASTER_PORT=29513 scripts/ranks.sh 2 kvc-train -m data/models/stories260K --bases bases.safetensors \
      -f data/text/tinystories/tinystories_excerpt_30k.txt --alpha 16 --steps 20 -c 128 -t 1 -o gates2.safetensors
  kvc-train -m data/models/stories260K --bases bases.safetensors --target matryoshka --loss kl \
      -f data/text/tinystories/tinystories_excerpt_30k.txt --steps 100 -c 64 --batch 2 -o nested.safetensors
  kvc-eval kl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw --lowrank nested.safetensors:ranks=16
  kvc-train inspect -m data/models/stories260K --lowrank gates.safetensors --text "Once upon a time"
  kvc-eval kl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw --lowrank gates.safetensors
)");
  app.require_subcommand(0, 1);
  TrainCli t;
  add_train_options(app, t);
  std::function<int()> action = [&] {
    t.lr_given = app.get_option("--lr")->count() > 0;
    for (const CLI::Option* option : app.get_options())
      if (option->count() > 0 && !option->get_lnames().empty()) t.given.push_back("--" + option->get_lnames().front());
    return run_train(t);
  };
  kvc::train_app::add_inspect_command(app, action);
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, action);
}
