// Gate training: one of the translation units that need LibTorch's autograd/optim front end (slow to
// compile), with soft_mask_layer_cache.cpp and nested_basis.cpp. It also trains the nested bases.
#include "lowrank/gate_training.h"

#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "io/checkpoint_trailer.h"
#include "lowrank/lowrank_setup.h"
#include "lowrank/nested_basis.h"
#include "lowrank/rank_gate.h"
#include "lowrank/soft_mask_layer_cache.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/interrupt.h"
#include "util/named_settings.h"
#include "util/progress.h"

namespace kvc::lowrank {
namespace {

struct Forward {
  torch::Tensor ce, retain;
  torch::Tensor log_probs;  // [T - 1, vocab]: the gated cache's next-token distributions
  double hard_retain = 0;
};

Forward run_window(const LlamaModel& model, const std::vector<GateParams>& k, const std::vector<GateParams>& v,
                   const std::vector<int>& window, double tau) {
  const AttentionShape shape = model.config().attention_shape();
  MaskLog log;
  // The model's own cache layout: the gated layers are the global ones, as in the low-rank cache (a
  // sliding-window layer keeps its window, with its own RoPE).
  KVCache cache = model.new_cache(
      [&](int64_t l) { return std::make_unique<SoftMaskLayerCache>(shape, model.rope(), k[l], v[l], tau, &log); });
  const torch::Tensor logits = model.forward(window, cache);
  const int64_t T = static_cast<int64_t>(window.size());
  const std::vector<int64_t> next(window.begin() + 1, window.end());
  const torch::Tensor targets = torch::tensor(next, torch::kLong).to(logits.device());
  const torch::Tensor scored = logits.narrow(0, 0, T - 1);
  return {torch::cross_entropy_loss(scored, targets), log.retain(), torch::log_softmax(scored, -1),
          log.hard_sum / std::max(1.0, log.hard_count)};
}

// The exact model's next-token log-probabilities over a window [T - 1, vocab] (full dense cache).
torch::Tensor exact_log_probs(const LlamaModel& model, const std::vector<int>& window) {
  torch::NoGradGuard no_grad;
  KVCache cache = model.new_cache();
  const torch::Tensor logits = model.forward(window, cache);
  return torch::log_softmax(logits.narrow(0, 0, logits.size(0) - 1), -1);
}

double exact_ce(const LlamaModel& model, const std::vector<int>& window) {
  const std::vector<int64_t> next(window.begin() + 1, window.end());
  return torch::nll_loss(exact_log_probs(model, window), torch::tensor(next, torch::kLong)).item<double>();
}

// KL(exact ‖ gated), averaged over the window's positions.
torch::Tensor kl_from_exact(const torch::Tensor& exact, const torch::Tensor& gated) {
  return (exact.exp() * (exact - gated)).sum(-1).mean();
}

// Window start for (step, slot): a pure function of the seed, so resuming needs no RNG state.
int64_t window_start(uint64_t seed, int64_t step, int64_t slot, int64_t n_starts) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(step) * 7919ULL +
                      static_cast<uint64_t>(slot));
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n_starts));
}

double lr_at(const TrainOptions& o, int64_t step) {
  if (step < o.warmup) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup);
  const double t = static_cast<double>(step - o.warmup) / static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup));
  return o.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}

std::string shape_text(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

// A checkpoint keeps the evaluations made so far as one row each.
torch::Tensor evals_to_tensor(const std::vector<EvalPoint>& evals) {
  std::vector<double> flat;
  for (const EvalPoint& e : evals) {
    flat.insert(flat.end(), {static_cast<double>(e.step), e.train_loss, e.heldout_ce, e.heldout_ce_full, e.soft_retain,
                             e.hard_retain, e.heldout_kl, e.tokens_per_second});
  }
  return torch::tensor(flat, torch::kDouble).view({static_cast<int64_t>(evals.size()), 8});
}

std::vector<EvalPoint> evals_from_tensor(const torch::Tensor& t) {
  KVC_CHECK(t.dim() == 2 && t.size(1) == 8 && t.scalar_type() == torch::kDouble,
            "--resume: the checkpoint's evaluations have an unexpected shape");
  std::vector<EvalPoint> evals;
  const torch::Tensor c = t.contiguous();
  const double* row = c.data_ptr<double>();
  for (int64_t i = 0; i < c.size(0); ++i, row += 8) {
    evals.push_back({static_cast<int64_t>(row[0]), row[1], row[2], row[3], row[4], row[5], row[6], row[7]});
  }
  return evals;
}

std::string signature(const LlamaModel& model, const TrainOptions& o) {
  // The loss joins the signature only when it is not the original one, so older checkpoints still resume.
  // A model with sliding-window layers trains its global layers' gates only: the mark keeps a checkpoint
  // holding every layer's gates from resuming.
  const ModelConfig& c = model.config();
  const bool has_local = static_cast<int64_t>(lowrank_layers(c).size()) < c.num_layers;
  // The nested bases' settings join it the same way.
  const std::string nested = o.target == TrainTarget::NestedBasis
                                 ? fmt::format("|nested|{}|{}", fmt::join(o.nested_shares, ","), o.eval_share)
                                 : "";
  return hash_string(fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}{}{}{}", c.config_hash, o.alpha, o.tau, o.lr,
                                 o.basis_lr_scale, o.weight_decay, o.clip, o.steps, o.warmup, o.seq_len, o.batch,
                                 o.seed, o.init_bias, o.loss == TrainLoss::CrossEntropy ? "" : "|kl",
                                 has_local ? "|global-layers" : "", nested));
}

// The same settings by flag, stored in the checkpoint so that a mismatch names them.
NamedSettings named_settings(const LlamaModel& model, const TrainOptions& o) {
  const ModelConfig& c = model.config();
  const bool has_local = static_cast<int64_t>(lowrank_layers(c).size()) < c.num_layers;
  const auto text = [](auto v) { return fmt::format("{}", v); };
  return {{"the model's config hash", c.config_hash},
          {"--alpha", text(o.alpha)},
          {"--tau", text(o.tau)},
          {"--lr", text(o.lr)},
          {"--basis-lr-scale", text(o.basis_lr_scale)},
          {"--weight-decay", text(o.weight_decay)},
          {"--clip", text(o.clip)},
          {"--steps", text(o.steps)},
          {"--warmup", text(o.warmup)},
          {"-c/--ctx-size", text(o.seq_len)},
          {"--batch", text(o.batch)},
          {"--seed", text(o.seed)},
          {"--init-bias", text(o.init_bias)},
          {"--loss", o.loss == TrainLoss::CrossEntropy ? "ce" : "kl"},
          {"gates for global layers only", has_local ? "yes" : "no"},
          {"--target", o.target == TrainTarget::Gates ? "gates" : "matryoshka"},
          {"--matryoshka-shares", fmt::format("{}", fmt::join(o.nested_shares, ","))},
          {"--eval-share", text(o.eval_share)}};
}

}  // namespace

TrainResult train_gates(const LlamaModel& model, const Artifact& bases, const std::vector<int>& train_ids,
                        const std::vector<int>& heldout_ids, const TrainOptions& o,
                        const std::function<void(const EvalPoint&)>& on_eval, const Ranks* ranks) {
  o.validate();
  KVC_CHECK(!model.has_block_weights(),
            "gate training differentiates through every projection, whose weights must be "
            "dequantized: load the GGUF with --dtype float32");
  const Ranks alone;
  const Ranks& r = ranks != nullptr ? *ranks : alone;
  KVC_CHECK(o.batch >= r.world(),
            "--batch {} over {} ranks: each rank runs whole windows, so --batch must be at "
            "least the number of ranks",
            o.batch, r.world());
  const ModelConfig& c = model.config();
  const int64_t L = c.num_layers, d = c.kv_dim();
  KVC_CHECK(o.steps > 0 && o.batch > 0, "--steps and --batch must be > 0");
  KVC_CHECK(o.seq_len >= 2 && o.seq_len <= c.max_position_embeddings, "--seq-len must be in 2..{}, got {}",
            c.max_position_embeddings, o.seq_len);
  KVC_CHECK(o.tau > 0 && o.tau < 1, "--tau must be in (0, 1), got {}", o.tau);
  KVC_CHECK(o.alpha >= 0, "--alpha must be >= 0, got {}", o.alpha);
  KVC_CHECK(static_cast<int64_t>(train_ids.size()) > o.seq_len,
            "--data: {} training tokens, need more than --seq-len {}", train_ids.size(), o.seq_len);
  KVC_CHECK(static_cast<int64_t>(heldout_ids.size()) >= o.seq_len, "held-out text has {} tokens, need --seq-len {}",
            heldout_ids.size(), o.seq_len);
  KVC_CHECK(!o.resume || !o.checkpoint.empty(), "--resume needs --checkpoint FILE");
  const auto fopts = torch::TensorOptions().dtype(model.dtype()).device(model.device());

  // Gates: U from the PCA basis; W = 0 and a bias ramp towards late cut-offs (start near full rank).
  // Nested bases: U = U_pca · C(A) with A = 0 (the PCA basis), and no gate.
  const bool nested = o.target == TrainTarget::NestedBasis;
  std::vector<GateParams> k(L), v(L);
  std::vector<torch::Tensor> k_rotation(L), v_rotation(L);  // nested: the raw A of each layer's K and V
  std::vector<torch::Tensor> basis_params, gate_params;
  const torch::Tensor ramp = torch::linspace(0, o.init_bias, d, fopts);
  // Only the layers the low-rank cache compresses are gated (sliding-window layers keep their window).
  const std::vector<int64_t> gated_layers = lowrank_layers(c);
  for (int64_t l = 0; l < L; ++l) {
    const bool gated = std::find(gated_layers.begin(), gated_layers.end(), l) != gated_layers.end();
    for (auto [g, p, a] : {std::make_tuple(&k[l], &bases.layers[l].key, &k_rotation[l]),
                           std::make_tuple(&v[l], &bases.layers[l].value, &v_rotation[l])}) {
      if (nested) {
        g->U = p->U.to(fopts).clone();
        g->rank = d;
        *a = torch::zeros({d, d}, fopts).set_requires_grad(gated);
        if (gated) gate_params.push_back(*a);
        continue;
      }
      g->U = p->U.to(fopts).clone().set_requires_grad(gated);
      g->W = torch::zeros({d, d}, fopts).set_requires_grad(gated);
      g->b = ramp.clone().set_requires_grad(gated);
      if (!gated) continue;
      basis_params.push_back(g->U);
      gate_params.push_back(g->W);
      gate_params.push_back(g->b);
    }
  }
  // The parameters window `slot` of `step` runs with (slot < 0: a held-out evaluation). Gates: the
  // trained ones. Nested: the rotated bases, cut at the ranks drawn for the window, or at --eval-share.
  const auto window_params = [&](int64_t at_step, int64_t slot) {
    if (!nested) return std::make_pair(k, v);
    std::vector<GateParams> wk(L), wv(L);
    for (int64_t l = 0; l < L; ++l) {
      for (auto [w, g, a, which] :
           {std::make_tuple(&wk[l], &k[l], &k_rotation[l], 0), std::make_tuple(&wv[l], &v[l], &v_rotation[l], 1)}) {
        w->U = a->requires_grad() ? torch::matmul(g->U, cayley_rotation(*a)) : g->U;
        w->rank = slot < 0 ? rank_of_share(o.eval_share, d)
                           : nested_rank(o.nested_shares, d, o.seed, at_step, slot, l, which);
      }
    }
    return std::make_pair(wk, wv);
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(gate_params, std::make_unique<torch::optim::AdamWOptions>(
                                       torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay)));
  if (!nested) {
    groups.emplace_back(basis_params, std::make_unique<torch::optim::AdamWOptions>(
                                          torch::optim::AdamWOptions(o.lr * o.basis_lr_scale).weight_decay(0.0)));
  }
  torch::optim::AdamW optimizer(std::move(groups));
  std::vector<torch::Tensor> all_params = gate_params;
  all_params.insert(all_params.end(), basis_params.begin(), basis_params.end());

  const std::string sig = signature(model, o);
  const NamedSettings settings = named_settings(model, o);
  int64_t step = 0;
  TrainResult result;
  r.check_same("training flags (or models)", sig);
  if (o.resume) {
    // Rank 0 reads the file and sends it to the others: the ranks need no shared folder.
    std::string bytes;
    if (r.is_root()) {
      KVC_CHECK(file_exists(o.checkpoint), "--resume: checkpoint '{}' does not exist", o.checkpoint);
      bytes = read_text_file(o.checkpoint);  // bytes as stored
    }
    r.broadcast(bytes);
    bytes = checkpoint_archive(bytes, o.checkpoint);
    torch::serialize::InputArchive ar;
    try {
      ar.load_from(bytes.data(), bytes.size());
    } catch (const c10::Error&) {
      fail("--resume: cannot read checkpoint '{}'", o.checkpoint);
    }
    c10::IValue s;
    ar.read("signature", s);
    if (!s.isString() || s.toStringRef() != sig) {
      c10::IValue stored;
      const std::string differences =
          ar.try_read("settings", stored) && stored.isString()
              ? settings_differences(parse_named_settings(stored.toStringRef()), named_settings(model, o))
              : "";
      KVC_CHECK(differences.empty(),
                "--resume: '{}' was written with {}; resume with the same flags, or start again "
                "without --resume",
                o.checkpoint, differences);
      fail("--resume: '{}' was written with other settings or another model; resume with the same flags", o.checkpoint);
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < all_params.size(); ++i) {
      torch::Tensor t;
      ar.read("p" + std::to_string(i), t);
      KVC_CHECK(t.sizes() == all_params[i].sizes() && t.scalar_type() == all_params[i].scalar_type(),
                "--resume: '{}': parameter {} has shape {} where the gates need {}", o.checkpoint, i,
                shape_text(t.sizes()), shape_text(all_params[i].sizes()));
      KVC_CHECK(at::isfinite(t).all().item<bool>(),
                "--resume: '{}': parameter {} holds NaN or infinity; start again "
                "without --resume",
                o.checkpoint, i);
      all_params[i].copy_(t);
    }
    torch::Tensor t;
    ar.read("step", t);
    KVC_CHECK(t.numel() == 1 && !t.is_floating_point(), "--resume: '{}': the step counter is damaged", o.checkpoint);
    step = t.item<int64_t>();
    KVC_CHECK(step >= 0 && step <= o.steps, "--resume: '{}' is at step {}, outside this run's 0 to {} (--steps)",
              o.checkpoint, step, o.steps);
    torch::serialize::InputArchive opt_ar;
    ar.read("optimizer", opt_ar);
    optimizer.load(opt_ar);
    // The evaluations before the interruption, so the resumed run reports the whole curve (a checkpoint
    // written before they were kept has none).
    torch::Tensor evals;
    if (ar.try_read("evals", evals)) result.evals = evals_from_tensor(evals);
  }
  int64_t checkpoint_step = o.resume ? step : -1;
  const auto save_checkpoint = [&] {
    if (o.checkpoint.empty()) return;
    checkpoint_step = step;
    if (!r.is_root()) return;
    torch::serialize::OutputArchive ar;
    ar.write("signature", c10::IValue(sig));
    ar.write("settings", c10::IValue(named_settings_text(settings)));
    for (size_t i = 0; i < all_params.size(); ++i) ar.write("p" + std::to_string(i), all_params[i].detach());
    ar.write("step", torch::tensor(step));
    ar.write("evals", evals_to_tensor(result.evals));
    torch::serialize::OutputArchive opt_ar;
    optimizer.save(opt_ar);
    ar.write("optimizer", opt_ar);
    // Serialised in memory (gate parameters are small) and written by our own writer, so a full disk
    // is one line naming the user's path and leaves no temporary file, and an interruption never
    // leaves half a checkpoint.
    std::string bytes;
    try {
      ar.save_to([&bytes](const void* data, size_t size) {
        bytes.append(static_cast<const char*>(data), size);
        return size;
      });
    } catch (const c10::Error&) {
      fail("--checkpoint: cannot serialise the training state for '{}'", o.checkpoint);
    }
    write_file_atomic(o.checkpoint, seal_checkpoint(bytes));
  };

  // Held-out windows and their exact-cache cross-entropy (the floor the gates are compared with).
  std::vector<std::vector<int>> heldout;
  for (int64_t i = 0; i < o.eval_windows && (i + 1) * o.seq_len <= static_cast<int64_t>(heldout_ids.size()); ++i) {
    heldout.emplace_back(heldout_ids.begin() + i * o.seq_len, heldout_ids.begin() + (i + 1) * o.seq_len);
  }
  // Sums across ranks, with a failure (a rank gone) naming the checkpoint that is still good.
  const auto exchange = [&](std::vector<torch::Tensor>& tensors) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      r.sum(tensors);
    } catch (const Error& e) {
      if (checkpoint_step < 0) throw;
      fail("{}; checkpoint '{}' (step {}) is intact: start every rank again with --resume", e.what(), o.checkpoint,
           checkpoint_step);
    }
    result.exchange_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Held-out window i is scored by rank i % world; the sums are added up across ranks.
  const auto mine = [&](size_t i) { return static_cast<int64_t>(i) % r.world() == r.rank(); };
  const double n_heldout = static_cast<double>(heldout.size());
  double ce_full = 0;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> sums = {torch::zeros({1}, torch::kDouble)};
    for (size_t i = 0; i < heldout.size(); ++i)
      if (mine(i)) sums[0] += exact_ce(model, heldout[i]);
    exchange(sums);
    ce_full = sums[0].item<double>() / n_heldout;
  }

  double last_loss = 0;
  const auto evaluate = [&] {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> sums = {torch::zeros({4}, torch::kDouble)};
    auto acc = sums[0].accessor<double, 1>();
    // One set of parameters for every held-out window (for nested bases, one rotation per evaluation).
    const auto [wk, wv] = window_params(step, -1);
    for (size_t i = 0; i < heldout.size(); ++i) {
      if (!mine(i)) continue;
      const Forward f = run_window(model, wk, wv, heldout[i], o.tau);
      acc[0] += f.ce.item<double>();
      acc[1] += f.retain.item<double>();
      acc[2] += f.hard_retain;
      acc[3] += kl_from_exact(exact_log_probs(model, heldout[i]), f.log_probs).item<double>();
    }
    exchange(sums);
    EvalPoint e;
    e.step = step;
    e.train_loss = last_loss;
    e.heldout_ce_full = ce_full;
    e.heldout_ce = sums[0][0].item<double>() / n_heldout;
    e.soft_retain = sums[0][1].item<double>() / n_heldout;
    e.hard_retain = sums[0][2].item<double>() / n_heldout;
    e.heldout_kl = sums[0][3].item<double>() / n_heldout;
    return e;
  };

  const int64_t n_starts = static_cast<int64_t>(train_ids.size()) - o.seq_len + 1;
  const int64_t end_step = o.stop_after > 0 ? std::min(o.steps, o.stop_after) : o.steps;
  Progress progress("train", std::max<int64_t>(0, end_step - step) * o.batch * o.seq_len, "tok",
                    o.show_progress && r.is_root());
  const auto t_start = std::chrono::steady_clock::now();
  int64_t run_tokens = 0;
  bool stop = false;
  while (step < end_step && !stop) {
    const double lr = lr_at(o, step);
    static_cast<torch::optim::AdamWOptions&>(optimizer.param_groups()[0].options()).lr(lr);
    if (!nested)
      static_cast<torch::optim::AdamWOptions&>(optimizer.param_groups()[1].options()).lr(lr * o.basis_lr_scale);
    optimizer.zero_grad();
    double loss_sum = 0;
    for (int64_t b = r.rank(); b < o.batch; b += r.world()) {
      const int64_t s0 = window_start(o.seed, step, b, n_starts);
      const std::vector<int> window(train_ids.begin() + s0, train_ids.begin() + s0 + o.seq_len);
      const auto [wk, wv] = window_params(step, b);
      const Forward f = run_window(model, wk, wv, window, o.tau);
      const torch::Tensor fit =
          o.loss == TrainLoss::CrossEntropy ? f.ce : kl_from_exact(exact_log_probs(model, window), f.log_probs);
      // A nested basis's retain rate is the drawn ranks' share, not a function of the parameters.
      const torch::Tensor loss = (nested ? fit : fit + o.alpha * f.retain * f.retain) / static_cast<double>(o.batch);
      loss.backward();
      loss_sum += loss.item<double>();
    }
    // One exchange per step: every gradient, the loss and whether any rank was interrupted (so that
    // all ranks stop after the same step and none waits for a sum that will not come).
    if (r.world() > 1) {
      std::vector<torch::Tensor> grads;
      for (torch::Tensor& p : all_params) {
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        grads.push_back(p.grad().flatten());
      }
      std::vector<torch::Tensor> sums = {torch::cat(grads),
                                         torch::tensor({loss_sum, interrupted() ? 1.0 : 0.0}, torch::kDouble)};
      exchange(sums);
      int64_t offset = 0;
      for (torch::Tensor& p : all_params) {
        p.mutable_grad().copy_(sums[0].narrow(0, offset, p.numel()).view_as(p));
        offset += p.numel();
      }
      loss_sum = sums[1][0].item<double>();
      stop = sums[1][1].item<double>() > 0;
    } else {
      stop = interrupted();
    }
    torch::nn::utils::clip_grad_norm_(all_params, o.clip);
    optimizer.step();
    ++step;
    last_loss = loss_sum;
    run_tokens += o.batch * o.seq_len;
    progress.advance(o.batch * o.seq_len);
    if ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps) {
      EvalPoint e = evaluate();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      e.tokens_per_second = secs > 0 ? static_cast<double>(run_tokens) / secs : 0;
      result.evals.push_back(e);
      if (on_eval) on_eval(e);
    }
    if (o.checkpoint_every > 0 && step % o.checkpoint_every == 0) save_checkpoint();
  }
  progress.finish();
  result.steps_done = step;
  result.tokens_seen = step * o.batch * o.seq_len;
  result.finished = step >= o.steps;
  result.interrupted = stop;
  if (!result.finished) save_checkpoint();

  Artifact& a = result.gates;
  if (nested) {
    // A bases artifact: the rotated bases, with the PCA eigenvalues they started from (what share= reads).
    torch::NoGradGuard no_grad;
    const auto [wk, wv] = window_params(step, -1);
    a.kind = kBasesKind;
    for (int64_t l = 0; l < L; ++l) {
      a.layers.push_back({{wk[l].U.detach().to(torch::kFloat).cpu().clone(), {}, {}, bases.layers[l].key.eigenvalues},
                          {wv[l].U.detach().to(torch::kFloat).cpu().clone(), {}, {}, bases.layers[l].value.eigenvalues},
                          bases.layers[l].rotated_key});
    }
  } else {
    a.kind = kGatesKind;
    a.tau = o.tau;
    for (int64_t l = 0; l < L; ++l) {
      a.layers.push_back(
          {{k[l].U.detach().cpu().clone(), k[l].W.detach().cpu().clone(), k[l].b.detach().cpu().clone(), {}},
           {v[l].U.detach().cpu().clone(), v[l].W.detach().cpu().clone(), v[l].b.detach().cpu().clone(), {}},
           bases.layers[l].rotated_key});
    }
  }
  const EvalPoint last = result.evals.empty() ? evaluate() : result.evals.back();
  a.metadata = {{"alpha", fmt::format("{}", o.alpha)},
                {"steps", std::to_string(step)},
                {"tokens", std::to_string(result.tokens_seen)},
                {"seq_len", std::to_string(o.seq_len)},
                {"batch", std::to_string(o.batch)},
                {"lr", fmt::format("{}", o.lr)},
                {"seed", std::to_string(o.seed)},
                {"loss", o.loss == TrainLoss::CrossEntropy ? "ce" : "kl"},
                {"final_ce", fmt::format("{:.6f}", last.heldout_ce)},
                {"final_kl", fmt::format("{:.6f}", last.heldout_kl)},
                {"final_ce_exact_cache", fmt::format("{:.6f}", last.heldout_ce_full)},
                {"final_retain_rate_soft", fmt::format("{:.6f}", last.soft_retain)},
                {"final_retain_rate", fmt::format("{:.6f}", last.hard_retain)}};
  if (nested) {
    a.metadata["trained"] = "matryoshka";
    a.metadata["matryoshka_shares"] = fmt::format("{}", fmt::join(o.nested_shares, ","));
    a.metadata["eval_share"] = fmt::format("{}", o.eval_share);
    a.metadata["eigenvalues"] = "the PCA basis's the training started from";
  }
  return result;
}

}  // namespace kvc::lowrank
