#!/usr/bin/env bash
# Low-rank caches on Gemma 3 270M at matched memory (kept shares 0.5 / 0.3 / 0.2 of the global layers'
# cache): KL and perplexity against the exact model of
#   fixed     one rank for keys and values (round(share * 256));
#   searched  ranks per layer and K/V searched for the most explained variance within the share
#             (--lowrank bases:share=S);
#   adaptive  token-wise gates from kvc-train, one gate set per entry of GATE_SETS (loss:alpha; by default
#             --loss kl and --loss ce at alpha 0.25, 1 and 4). For a target share, each gate set's threshold tau is
#             bisected on the training text until it keeps the share there; of the gate sets of one loss
#             that reach it, the one with the lowest KL on the training text is evaluated (on the
#             evaluation texts the gates keep what they keep: it is reported).
# Bases and gates come from the first 80% of the essays; evaluation on the last 20% (held out, same
# domain) and on WikiText-2 (another domain). Each gate set trains TRAIN_STEPS steps of 4 windows of 128
# tokens (a quarter of the tokens of recipes/lowrank_matched_memory.sh's gate sets: kvc-train runs at
# about 60 tok/s on this model with 2 threads here), with the held-out KL every 25 steps to show how far
# training has come. The compressed half of each window is decoded 64 tokens a step (--chunk 64): a
# low-rank cache compresses each entry as it is appended, so the result is that of 1 token a step
# (equal to 7 digits, 4.5 times faster).
# Bases and gate sets are kept in WORK (build/recipe-work/... unless set): a run that is interrupted, or
# one with gate sets added to GATE_SETS, trains only the gate sets not finished there (an interrupted
# training continues from its checkpoint, which keeps its held-out curve so far).
# Writes data/results/lowrank/matched_memory_gemma3.{json,md}; about 25 minutes a kl gate set, 18 a ce one
# (no exact model to run beside), and 30 minutes of bisection and evaluation here with 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
OUT=data/results/lowrank
GGUF=$(scripts/model_path.sh gemma3-270m)
THREADS=${THREADS:-2}
TOKENS=50000
WINDOWS=4
CTX=512
TRAIN_STEPS=${KVC_STEPS:-150}
BATCH=4
BISECT=8
GATE_SETS=${GATE_SETS:-kl:0.25 kl:1 kl:4 ce:0.25 ce:1 ce:4}
SHARES="0.5 0.3 0.2"
work=${WORK:-build/recipe-work/lowrank_matched_memory_gemma}
if [ -n "${KVC_SMOKE:-}" ]; then
  TOKENS=2000; WINDOWS=1; CTX=128; TRAIN_STEPS=1; BATCH=1; BISECT=1; GATE_SETS=kl:4; SHARES=0.5; OUT=$(mktemp -d)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$OUT" "$work"

# Artifacts are named by their settings and the training text's checksum, so a WORK folder never mixes
# runs of different sizes or texts.
. recipes/lib/essay_bases.sh
bases=$(essay_bases "$work" "$BIN" "$GGUF" "$TOKENS" "$THREADS" ${KVC_SMOKE:+80000})
gates_name() { echo "gates.$bases.${1%%:*}.${1#*:}.s$TRAIN_STEPS.b$BATCH"; }
source recipes/lib/gate_training.sh
for set in $GATE_SETS; do
  train_gate_set "$work/$(gates_name "$set")" "$BIN/kvc-train" -m "$GGUF" --dtype float32 -t "$THREADS" --bases "$work/$bases.safetensors" \
    -f "$work/train.txt" --loss "${set%%:*}" --alpha "${set#*:}" --steps "$TRAIN_STEPS" -c 128 --batch "$BATCH" --lr 0.02 \
    --eval-every 25 --eval-windows 4
done

names=(); for set in $GATE_SETS; do names+=("$set=$(gates_name "$set")"); done
python3 - "$BIN" "$GGUF" "$work" "$OUT" "$WINDOWS" "$CTX" "$THREADS" "$BISECT" "$TRAIN_STEPS" "$BATCH" "$bases" \
  "${names[*]}" $SHARES <<'PY'
import json, pathlib, sys
sys.path.insert(0, "recipes/lib")
from matched_memory import best_gate_set, kl_report, table
BIN, gguf, work, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
windows, ctx, threads, bisect, steps, batch = (int(x) for x in sys.argv[5:11])
bases_name, shares = sys.argv[11], [float(x) for x in sys.argv[13:]]
gate_sets = dict(entry.split("=") for entry in sys.argv[12].split())  # "loss:alpha" -> artifact name
losses = list(dict.fromkeys(s.split(":")[0] for s in gate_sets))
texts = {"in-domain": work / "eval.txt", "other-domain": pathlib.Path("data/text/wikitext2/wiki.test.raw")}
if len(shares) == 1:  # the smoke run
    del texts["other-domain"]
bases = work / f"{bases_name}.safetensors"
dkv = json.loads((work / f"{bases_name}.json").read_text())["kv_dim"]

# Only the global layers are low-rank: the kept share is that of the global layers' part of the cache.
kl = lambda text, n_windows, spec: kl_report(BIN, gguf, text, ctx, n_windows, threads, spec)

# For each share and loss, the gate set and tau chosen on the training text (2 windows).
train_text = work / "train.txt"
measure = lambda spec: kl(train_text, 2, spec)
chosen = {}
for share in shares:
    for loss in losses:
        sets = {s.split(":")[1]: work / f"{n}.safetensors" for s, n in gate_sets.items() if s.startswith(loss + ":")}
        best = best_gate_set(measure, sets, share, bisect)
        if best is not None:
            chosen[(share, loss)] = best

rows = []
for share in shares:
    rank = max(1, round(share * dkv))
    specs = {"fixed": [str(bases), "--rank", str(rank)], "searched": [f"{bases}:share={share}"]}
    for loss in losses:
        if (share, loss) in chosen:
            specs[f"adaptive ({loss})"] = chosen[(share, loss)]["spec"]
    for method, spec in specs.items():
        for domain, text in texts.items():
            r = kl(text, windows, spec)
            rows.append({"target_share": share, "method": method, "domain": domain,
                         "detail": " ".join(spec[1:]) or spec[0].replace(str(work) + "/", ""),
                         "kept_share_of_cache": 1 - r["compression_ratio"], "kept_share": r["kept_share"],
                         "kl": r["kl"], "ppl": r["ppl_compressed"], "ppl_exact": r["ppl_reference"],
                         "top1_agreement": r["top1_agreement"]})
trains = {s: json.loads((work / f"{n}.json").read_text()) for s, n in gate_sets.items()}
rates = {s: t["evals"][-1]["tokens_per_second"] for s, t in trains.items()}
rate = sum(rates.values()) / len(rates)
tokens = next(iter(trains.values()))["tokens"]
recipe_tokens = 300 * 8 * 128  # the gate training of recipes/lowrank_matched_memory.sh, per gate set
result = {"rows": rows, "kv_dim": dkv, "threads": threads, "train_steps": steps, "train_batch": batch,
          "train_tokens": tokens, "train_tokens_per_second": rates,
          "train_evals": {s: t["evals"] for s, t in trains.items()},
          "chosen": {f"{k[0]} {k[1]}": {x: v[x] for x in ("label", "tau", "train_kl")} for k, v in chosen.items()},
          "hours_per_recipe_gate_set": recipe_tokens / rate / 3600}
(out / "matched_memory_gemma3.json").write_text(json.dumps(result, indent=1) + "\n")

methods = ["fixed", "searched"] + [f"adaptive ({loss})" for loss in losses]
described = "; ".join(f"--loss {loss} at alpha " + ", ".join(s.split(":")[1] for s in gate_sets if s.startswith(loss + ":"))
                      for loss in losses)
lines = [f"Gemma 3 270M (Q4_K_M GGUF), KL and perplexity against the exact model at matched memory ({windows} "
         f"windows of {ctx} tokens; bases from the first 80% of the essays; gates trained {steps} steps of {batch} "
         f"windows of 128 tokens there, {described}). Each cell: KL / ppl (kept share of the global layers' "
         "cache: only the 3 global layers are low-rank; the 15 sliding-window layers keep their 512-token window as "
         "is); — : no gate set of this loss keeps this share.", ""]
for domain in texts:
    sel = [r for r in rows if r["domain"] == domain]
    lines += [f"**{domain}** ({'the held-out 20% of the essays' if domain == 'in-domain' else 'WikiText-2'}; "
              f"exact ppl {sel[0]['ppl_exact']:.2f})", "", *table(sel, shares, methods), ""]
for s, t in trains.items():
    loss, alpha = s.split(":")
    lines += [f"Gate training, --loss {loss} at alpha {alpha} ({rates[s]:.1f} tok/s), held-out KL (4 windows of 128 "
              "tokens from the last 10% of the training text, which kvc-train holds out; kept share at tau 0.1) by step: " +
              ", ".join(f"{e['step']}: {e['heldout_kl']:.3f} ({e['retain_hard']:.3f})" for e in t["evals"]), ""]
lines += ["Gate sets chosen on the training text: " +
          ", ".join(f"{k[0]} ({k[1]}): alpha {v['label']}, tau {v['tau']}" for k, v in chosen.items()) + ".",
          "", f"kvc-train on this model, {threads} threads: {rate:.1f} tok/s on average ({tokens} tokens a gate set); one "
          f"gate set of the stories260K/kvc-tiny-lm recipe ({recipe_tokens} tokens) would take "
          f"{result['hours_per_recipe_gate_set']:.1f} hours here."]
(out / "matched_memory_gemma3.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
