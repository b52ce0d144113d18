#!/usr/bin/env bash
# Low-rank caches at matched memory: for kept shares 0.5 / 0.3 / 0.2 of the cache, KL and perplexity
# against the exact model of
#   fixed     one rank for keys and values in every layer (round(share * d_kv));
#   searched  ranks per layer and K/V searched for the most explained variance within the share
#             (--lowrank bases:share=S, lib/lowrank/rank_search.h);
#   adaptive  token-wise gates from kvc-train, with the paper's cross-entropy loss and with the KL
#             divergence from the exact model (--loss kl), each at alpha 0.25, 1, 4 and 16. For a target share,
#             every gate set's threshold tau is bisected on the training text so that it keeps the share
#             there; of the gate sets that reach it, the one with the lowest KL on the training text is
#             evaluated (on the evaluation texts the gates keep what they keep: it is reported).
# Bases and gates come from training text; each is evaluated on held-out text of the same domain and on
# text of another domain. Writes data/results/lowrank/matched_memory.{jsonl,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
OUT=data/results/lowrank
STEPS=${KVC_STEPS:-300}
BATCH=8
WINDOWS=8
BISECT=8
ALPHAS="0.25 1 4 16"
SHARES="0.5 0.3 0.2"
if [ -n "${KVC_SMOKE:-}" ]; then STEPS=2; BATCH=2; WINDOWS=1; BISECT=1; ALPHAS=4; SHARES=0.3; OUT=$(mktemp -d); fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
TINY=$(needle_model)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Training text and held-out texts: stories260K on TinyStories (other domain: WikiText-2), kvc-tiny-lm
# on the essays (other domain: WikiText-2).
head -c 25000 data/text/tinystories/tinystories_excerpt_30k.txt > "$work/stories_train.txt"
tail -c +25001 data/text/tinystories/tinystories_excerpt_30k.txt > "$work/stories_eval.txt"
. recipes/lib/essay_split.sh
split_essays "$work/essays_train.txt" "$work/essays_eval.txt"

for entry in "stories260K|stories|data/models/stories260K" "kvc-tiny-lm|essays|$TINY"; do
  IFS='|' read -r model text path <<< "$entry"
  "$BIN/kvc-calibrate" -m "$path" -t 1 -f "$work/${text}_train.txt" --tokens 100000 -c 256 \
    -o "$work/$model.bases.safetensors" --json > "$work/$model.calibrate.json"
  for loss in ce kl; do
    for alpha in $ALPHAS; do
      "$BIN/kvc-train" -m "$path" -t 1 --bases "$work/$model.bases.safetensors" -f "$work/${text}_train.txt" \
        --loss $loss --alpha "$alpha" --steps "$STEPS" -c 128 --batch "$BATCH" --lr 0.02 --eval-every 0 \
        -o "$work/$model.$loss.$alpha.safetensors" --json > "$OUT/matched_memory_train_${model}_${loss}_$alpha.json"
    done
  done
done

python3 - "$BIN" "$work" "$OUT" "$WINDOWS" "$BISECT" "$STEPS" "$BATCH" "$ALPHAS" "$TINY" "$SHARES" <<'PY'
import json, pathlib, subprocess, sys
sys.path.insert(0, "recipes/lib")
from matched_memory import best_gate_set, table
BIN, work, out = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
windows, bisect, steps, batch = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
alphas = sys.argv[8].split()
shares = [float(s) for s in sys.argv[10].split()]
paths = {"stories260K": "data/models/stories260K", "kvc-tiny-lm": sys.argv[9]}
models = {"stories260K": ("stories", work / "stories_eval.txt"), "kvc-tiny-lm": ("essays", work / "essays_eval.txt")}
other = "data/text/wikitext2/wiki.test.raw"

def kl(model, text, n_windows, lowrank):
    cmd = [f"{BIN}/kvc-eval", "kl", "-m", paths[model], "-t", "1", "-f", str(text), "-c", "256",
           "--max-windows", str(n_windows), "--lowrank", *lowrank, "--json"]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r["kept_share"] = 1 - r["compression_ratio"]
    return r

rows = []
for model, (name, indomain) in models.items():
    train = work / f"{name}_train.txt"
    bases = work / f"{model}.bases.safetensors"
    dkv = json.loads((work / f"{model}.calibrate.json").read_text())["kv_dim"]
    for share in shares:
        specs = {"fixed": ([str(bases), "--rank", str(max(1, round(share * dkv)))], f"rank {max(1, round(share * dkv))}"),
                 "searched": ([f"{bases}:share={share}"], f"share={share}")}
        for loss in ("ce", "kl"):
            gate_sets = {f"loss {loss}, alpha {a}": work / f"{model}.{loss}.{a}.safetensors" for a in alphas}
            best = best_gate_set(lambda spec: kl(model, train, 2, spec), gate_sets, share, bisect)
            if best is not None:
                specs[f"adaptive ({loss})"] = (best["spec"], f"{best['label']}, tau {best['tau']}")
        for domain, text in (("in-domain", indomain), ("other-domain", other)):
            for method, (spec, detail) in specs.items():
                r = kl(model, text, windows, spec)
                rows.append({"model": model, "domain": domain, "target_share": share, "method": method, "detail": detail,
                             "kept_share": r["kept_share"], "kl": r["kl"], "top1_agreement": r["top1_agreement"],
                             "ppl": r["ppl_compressed"], "ppl_exact": r["ppl_reference"], "tokens_scored": r["tokens_scored"]})

(out / "matched_memory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
methods = ["fixed", "searched", "adaptive (ce)", "adaptive (kl)"]
lines = [f"KL and perplexity against the exact model at matched memory ({windows} windows of 256 tokens; gates "
         f"trained {steps} steps of {batch} windows of 128 tokens on the training text). Each cell: KL / ppl "
         "(kept share on this text); — : no gate set reaches the share.", ""]
for model in models:
    for domain in ("in-domain", "other-domain"):
        sel = [r for r in rows if r["model"] == model and r["domain"] == domain]
        lines += [f"**{model}, {domain}** (exact ppl {sel[0]['ppl_exact']:.2f})", "",
                  *table(sel, shares, methods), ""]
lines.append("Adaptive gate sets chosen: " + "; ".join(sorted({f"{r['model']} {r['target_share']}: {r['detail']}"
                                                            for r in rows if r["method"].startswith("adaptive")})))
(out / "matched_memory.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
